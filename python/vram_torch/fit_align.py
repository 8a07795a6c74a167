"""fit_align.py — lines up the allocation streams of one program recorded at two batch sizes
when they are not the same length: a library may allocate a workspace at one batch and none at
the other (cuDNN chooses its algorithm by shape), which shifts every later event.

Each allocation carries its site, the Python stack that made it (fit_child.py writes them beside
the trace; "" where no Python ran: the autograd engine's). Events become tokens: an allocation
(stream, site, scoped: everything made during its life is freed within it, as a workspace's), a
free ("f", the freed allocation's site). Without "scoped", a workspace one batch has would pair
with an allocation the other batch holds from the same site, and its size be read as that one's
growth. The two token lists are walked together; where they differ,
the smallest skip (events of one side, or of both) after which WINDOW tokens agree again is taken
as events one side has and the other lacks. The result is one stream of allocations, each with
its size at both batches where both have it, at one where one has it (a constant then: the
workspace as seen), and frees placed where the later of the two sides frees (so the stream never
holds less than either run did).
"""
import heapq
import zlib

LOOKAHEAD = 64  # events either side may have that the other lacks, at one place
WINDOW = 8      # tokens compared after a skip
MIN_AGREE = 3   # the fewest that must agree (the next difference may come sooner than WINDOW)


class AlignError(ValueError):
    pass


def site_of(frames):
    """A stable name (across processes) of an allocation's Python stack."""
    text = "|".join("%s:%s" % (f.get("filename", "?"), f.get("line", 0)) for f in frames or ())
    return "%08x" % zlib.crc32(text.encode()) if text else ""


def _nested(events):
    """For each allocation event's position: True where every allocation made during its lifetime
    is freed within it (a workspace, a temporary: scoped to one operation), False where one
    outlives it or it is never freed (memory the program holds on to). That is: at its free, it is
    the newest allocation still live (a max-heap of the live ones' positions, dead ones dropped
    lazily)."""
    made, dead, heap, out = {}, set(), [], {}
    for k, e in enumerate(events):
        if e[0] == "a":
            made[e[1]] = k
            out[k] = False
            heapq.heappush(heap, -k)
        elif e[1] in made:
            pos = made.pop(e[1])
            while heap and -heap[0] in dead:
                dead.discard(-heapq.heappop(heap))
            out[pos] = bool(heap) and -heap[0] == pos
            dead.add(pos)
    return out


def _tokens(events, sites):
    """An allocation (stream, site, scoped), a free ("f", site). Scoped (_nested) keeps a
    library's workspace from pairing with an allocation the program holds: the autograd engine's
    allocations have no Python stack, so their sites are all alike."""
    nested, out = _nested(events), []
    for k, e in enumerate(events):
        site = sites[e[1]] if e[1] < len(sites) else ""
        out.append(("a", e[3], site, nested[k]) if e[0] == "a" else ("f", site))
    return out


def _agree(t1, t2, a, b):
    """How many tokens agree from t1[a] and t2[b] on (up to WINDOW); WINDOW where both end."""
    n = 0
    while n < WINDOW and a + n < len(t1) and b + n < len(t2) and t1[a + n] == t2[b + n]:
        n += 1
    if a + n == len(t1) and b + n == len(t2):
        return WINDOW
    return n


def _resync(t1, t2, i, j):
    """(di, dj): the events to skip on each side after which the streams agree again: the fewest
    skipped after which at least MIN_AGREE tokens agree (the most, among skips of that many);
    None if none within LOOKAHEAD."""
    for total in range(1, 2 * LOOKAHEAD + 1):
        best, best_agree = None, MIN_AGREE - 1
        for di in range(max(0, total - LOOKAHEAD), min(total, LOOKAHEAD) + 1):
            a, b = i + di, j + total - di
            if a > len(t1) or b > len(t2):
                continue
            agree = _agree(t1, t2, a, b)
            if agree > best_agree:
                best, best_agree = (di, total - di), agree
        if best is not None:
            return best
    return None


def align(lo, hi, lo_sites, hi_sites):
    """One stream from two: [("a", uid, size_lo or None, size_hi or None, stream), ("f", uid)].
    AlignError when the streams differ past LOOKAHEAD events at one place."""
    t1, t2 = _tokens(lo, lo_sites), _tokens(hi, hi_sites)
    out, uid_of, sides, freed, next_uid = [], [{}, {}], {}, {}, [0]
    i = j = 0

    def alloc(e_lo, e_hi):
        uid = next_uid[0]
        next_uid[0] += 1
        present = set()
        for side, e in ((0, e_lo), (1, e_hi)):
            if e is not None:
                uid_of[side][e[1]] = uid
                present.add(side)
        sides[uid], freed[uid] = present, set()
        e = e_lo or e_hi
        out.append(("a", uid, e_lo[2] if e_lo else None, e_hi[2] if e_hi else None, e[3]))

    def free(side, e):
        uid = uid_of[side].get(e[1])
        if uid is None:
            raise AlignError("a free of an allocation the stream never made (event of id %d)" % e[1])
        freed[uid].add(side)
        if freed[uid] == sides[uid]:
            out.append(("f", uid))

    def one(side, e):
        if e[0] == "a":
            alloc(e if side == 0 else None, e if side == 1 else None)
        else:
            free(side, e)
    while i < len(lo) or j < len(hi):
        if i < len(lo) and j < len(hi) and t1[i] == t2[j]:
            if lo[i][0] == "a":
                alloc(lo[i], hi[j])
            else:
                free(0, lo[i])
                free(1, hi[j])
            i, j = i + 1, j + 1
            continue
        skip = _resync(t1, t2, i, j)
        if skip is None:
            raise AlignError("the streams differ at events %d and %d by more than %d events" % (i, j, LOOKAHEAD))
        for k in range(i, i + skip[0]):
            one(0, lo[k])
        for k in range(j, j + skip[1]):
            one(1, hi[k])
        i, j = i + skip[0], j + skip[1]
    return out
