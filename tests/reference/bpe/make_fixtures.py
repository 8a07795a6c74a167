"""make_fixtures.py — the tokenizer's test fixtures (tests/test_bpe.c), made from GPT-2's BPE
as OpenAI's encoder.py specifies it, with the `regex` module running GPT-2's real pattern.

    python3 tests/reference/bpe/make_fixtures.py KJV_TEXT tests/reference/bpe

Writes, in GPT-2's file formats:
  vocab.json       the 256 byte tokens (ids in GPT-2's order: bytes_to_unicode's), then one token per
                   merge, then <|endoftext|>; \\u escapes as OpenAI's encoder.json
  vocab_utf8.json  the same vocabulary as raw UTF-8, as Hugging Face writes it
  merges.txt       "#version: 0.2" then 600 merges learned here from the first 60 KB of the KJV text
                   plus a few lines of other scripts (BPE training: the most frequent adjacent pair,
                   ties to the smallest pair)
  cases.txt        per case three lines: the text as UTF-8 hex; the pre-tokenizer's pieces as byte
                   end offsets; the ids the reference encoder gives
The reference below is encoder.py's bytes_to_unicode, get_pairs and bpe(), written from its
description; nothing here is needed to run the tests.
"""
import collections
import json
import os
import sys

import regex

PAT = regex.compile(r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+""")

EXTRA = """Le café où l'on dîne: naïve résumé, Ærø, Straße, señor, ﬁn.
Ελληνικά κείμενα και ΑΒΓ. Привет, мир! Это тест — «кавычки».
日本語のテキストと漢字。한국어 텍스트. عربي ٣٤٥ مرحبا. हिन्दी पाठ।
Numbers: 1611, 3.14159, ½, Ⅻ, ²³, ٣. Emoji: 😀👍🏽 ok.
I'm sure they're here; we've seen it, you'll see, he'd say, it's done, don't.
"""

CASES = [
    "", "a", " ", "  ", "\n", "Hello world", "Hello, world!", "a  b", "a   b", "a \n b", "trailing   ",
    "   leading", "\n\nIn the beginning", "tab\tseparated\t\tvalues", "line\r\nbreak", "x \u00a0y", "ideo\u3000space",
    "I'm here", "don't", "they're", "we've", "you'll", "he'd", "it's", "IT'S LOUD", "'s", "''s", " 's", "rock 'n' roll",
    "'ll 're 've 'm 'd 't", "in 1611, 3.14", "x2y", "12345678901234567890", "½ Ⅻ ²³ ٣٤٥", "!!!", " ...", "a-b_c",
    "<|endoftext|>", "café", "naïve résumé", "Straße", "Ελληνικά", "Привет мир", "日本語のテキスト", "한국어",
    "emoji 😀👍🏽!", "\u200bzero width", "mixed123abc!?", "And God said, Let there be light: and there was light.",
    "   \n\t  \n", "a\n\n\nb", "$100.00 & 50% off", "e\u0301 combining", "ﬁn ligature", "\x00\x01\x7f control",
]


def bytes_to_unicode():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return bs, dict(zip(bs, map(chr, cs)))


ORDER, B2U = bytes_to_unicode()


def spell(piece):
    return "".join(B2U[b] for b in piece.encode("utf-8"))


def train(text, merges_wanted):
    words = collections.Counter(tuple(spell(p)) for p in PAT.findall(text))
    merges = []
    for _ in range(merges_wanted):
        pairs = collections.Counter()
        for w, c in words.items():
            for a, b in zip(w, w[1:]):
                pairs[(a, b)] += c
        if not pairs:
            break
        best = min(pairs, key=lambda p: (-pairs[p], p))
        merges.append(best)
        new = collections.Counter()
        for w, c in words.items():
            out, i = [], 0
            while i < len(w):
                if i + 1 < len(w) and (w[i], w[i + 1]) == best:
                    out.append(w[i] + w[i + 1])
                    i += 2
                else:
                    out.append(w[i])
                    i += 1
            new[tuple(out)] += c
        words = new
    return merges


def get_pairs(word):
    return {(word[i], word[i + 1]) for i in range(len(word) - 1)}


def bpe(token, ranks):
    word = tuple(token)
    pairs = get_pairs(word)
    if not pairs:
        return word
    while True:
        bigram = min(pairs, key=lambda p: ranks.get(p, float("inf")))
        if bigram not in ranks:
            break
        first, second = bigram
        new_word, i = [], 0
        while i < len(word):
            try:
                j = word.index(first, i)
            except ValueError:
                new_word.extend(word[i:])
                break
            new_word.extend(word[i:j])
            i = j
            if word[i] == first and i < len(word) - 1 and word[i + 1] == second:
                new_word.append(first + second)
                i += 2
            else:
                new_word.append(word[i])
                i += 1
        word = tuple(new_word)
        if len(word) == 1:
            break
        pairs = get_pairs(word)
    return word


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    corpus, out = sys.argv[1:]
    text = open(corpus, encoding="utf-8").read()[:60000] + EXTRA
    merges = train(text, 600)
    vocab = {}
    for b in ORDER:
        vocab[B2U[b]] = len(vocab)
    for a, b in merges:
        if a + b not in vocab:
            vocab[a + b] = len(vocab)
    vocab["<|endoftext|>"] = len(vocab)
    ranks = {m: i for i, m in enumerate(merges)}
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "vocab.json"), "w", encoding="ascii") as f:
        json.dump(vocab, f)
    with open(os.path.join(out, "vocab_utf8.json"), "w", encoding="utf-8") as f:
        json.dump(vocab, f, ensure_ascii=False, indent=1)
    with open(os.path.join(out, "merges.txt"), "w", encoding="utf-8") as f:
        f.write("#version: 0.2\n")
        for a, b in merges:
            f.write("%s %s\n" % (a, b))
    with open(os.path.join(out, "cases.txt"), "w", encoding="ascii") as f:
        for case in CASES:
            pieces = PAT.findall(case)
            assert "".join(pieces) == case
            ends, at = [], 0
            for p in pieces:
                at += len(p.encode("utf-8"))
                ends.append(at)
            ids = [vocab[t] for p in pieces for t in bpe(spell(p), ranks)]
            f.write("%s\n%s\n%s\n" % (case.encode("utf-8").hex() or "-", " ".join(map(str, ends)) or "-",
                                      " ".join(map(str, ids)) or "-"))
    print("%d merges, %d tokens, %d cases" % (len(merges), len(vocab), len(CASES)))


if __name__ == "__main__":
    main()
