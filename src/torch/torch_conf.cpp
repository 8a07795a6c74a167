/* torch_conf.cpp — PyTorch's allocator settings applied to the plug-in's allocators.
 *
 * Users fighting out-of-memory errors set PYTORCH_CUDA_ALLOC_CONF / PYTORCH_ALLOC_CONF
 * (expandable_segments, max_split_size_mb, garbage_collection_threshold, ...), often at the top
 * of the script. Under vram PyTorch's caching allocator no longer runs, so, unless VRAM_ALLOC_CONF
 * is set, the plug-in reads PyTorch's variables when each allocator starts (at the first
 * allocation on a device, so a script that sets them before its first CUDA tensor is honoured)
 * and applies what vram shares with PyTorch, with PyTorch's meaning:
 *
 *   expandable_segments, max_split_size_mb, max_non_split_rounding_mb,
 *   garbage_collection_threshold, roundup_power2_divisions (a number, or a list that gives every
 *   size the same count), per_process_memory_fraction (as memory_fraction), and
 *   PYTORCH_NO_CUDA_MEMORY_CACHING=1 (as caching:False);
 *
 * then, on top, whatever the program passed to torch.cuda.memory._set_allocator_settings before the
 * allocator started (vram_torch routes that call here: later calls win, as in PyTorch); the
 * pinned_* options stay PyTorch's (its pinned host allocator still runs); everything else
 * (backend, release_lock_on_cudamalloc, graph_capture_record_stream_reuse, a list of roundup
 * divisions that differ by size, a key PyTorch does not know) is left out and named in the notes,
 * which the plug-in prints once. An option given twice counts once, with its last value (a
 * later setting replaces an earlier one whole, as in PyTorch). A malformed string or a bad value
 * is an error naming the variable, as PyTorch's own parser would raise. The string is read as
 * PyTorch reads it: spaces dropped, commas between options (not inside [ ]), key:value.
 */
#include "torch_conf.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <unordered_set>
#include <vector>

namespace {

std::string env_value(const char *name) {
    const char *v = getenv(name);
    return v ? std::string(v) : std::string();
}

/* The string's options, as "key" / "value" (spaces dropped; a value may be a [ ] list). */
struct Option {
    std::string key, value;
};

vram_status split_options(const std::string &var, const std::string &text, std::vector<Option> *out) {
    std::string s;
    for (char c : text)
        if (c != ' ' && c != '\t' && c != '\n') s += c;
    size_t start = 0;
    int depth = 0;
    for (size_t i = 0; i <= s.size(); i++) {
        if (i < s.size() && s[i] == '[') depth++;
        if (i < s.size() && s[i] == ']') depth--;
        if (depth < 0) return vram_error(VRAM_ERR_INVALID_ARG, "%s: unbalanced ']' in '%s'", var.c_str(), text.c_str());
        if (i < s.size() && !(s[i] == ',' && depth == 0)) continue;
        std::string item = s.substr(start, i - start);
        start = i + 1;
        if (item.empty()) continue;
        size_t colon = item.find(':');
        if (colon == std::string::npos || colon == 0 || colon + 1 == item.size())
            return vram_error(VRAM_ERR_INVALID_ARG, "%s: '%s' is not key:value", var.c_str(), item.c_str());
        out->push_back({item.substr(0, colon), item.substr(colon + 1)});
    }
    if (depth != 0) return vram_error(VRAM_ERR_INVALID_ARG, "%s: unbalanced '[' in '%s'", var.c_str(), text.c_str());
    return VRAM_OK;
}

/* Each key once, at its last place with its last value: a later setting of an option replaces an
 * earlier one whole (a list of roundup divisions too, as in PyTorch), whether vram can apply it
 * or not. */
std::vector<Option> last_of_each(const std::vector<Option> &options) {
    std::vector<Option> out;
    std::unordered_set<std::string> seen;
    for (auto it = options.rbegin(); it != options.rend(); ++it)
        if (seen.insert(it->key).second) out.push_back(*it);
    std::reverse(out.begin(), out.end());
    return out;
}

bool power_of_two(unsigned long long v) { return v && !(v & (v - 1)); }

bool parse_count(const std::string &s, unsigned long long *v) {
    if (s.empty() || s.size() > 18 || s.find_first_not_of("0123456789") != std::string::npos) return false;
    *v = strtoull(s.c_str(), nullptr, 10);
    return true;
}

/* roundup_power2_divisions:[MB:d,...,>:d] by PyTorch's rule (16 intervals of sizes, by powers
 * of two from 1 MiB; the first entry also covers the intervals below it, ">" every interval from
 * the last one named). Sets *uniform to the one count every interval gets, or -1 when they differ. */
vram_status roundup_list(const std::string &var, const std::string &list, long long *uniform) {
    enum { kIntervals = 16 };
    unsigned long long div[kIntervals] = {0};
    std::string body = list.substr(1, list.size() - 2);
    size_t last = 0;
    bool first = true;
    size_t pos = 0;
    while (pos <= body.size()) {
        size_t comma = body.find(',', pos);
        std::string item = body.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
        pos = comma == std::string::npos ? body.size() + 1 : comma + 1;
        size_t colon = item.find(':');
        unsigned long long at = 0, d = 0;
        if (colon == std::string::npos || !parse_count(item.substr(colon + 1), &d) || (d && !power_of_two(d)))
            return vram_error(VRAM_ERR_INVALID_ARG,
                              "%s: roundup_power2_divisions: '%s' is not SIZE_MB:DIVISIONS (a power of two or 0)",
                              var.c_str(), item.c_str());
        std::string size = item.substr(0, colon);
        if (size == ">") {
            for (size_t i = last; i < kIntervals; i++) div[i] = d;
            continue;
        }
        if (!parse_count(size, &at) || !power_of_two(at))
            return vram_error(VRAM_ERR_INVALID_ARG, "%s: roundup_power2_divisions: '%s' is not a power of two (MB)",
                              var.c_str(), size.c_str());
        size_t index = 63 - __builtin_clzll(at);
        if (index >= kIntervals) index = kIntervals - 1;
        if (first) {
            for (size_t i = 0; i < index; i++) div[i] = d;
            first = false;
        }
        div[index] = d;
        last = index;
    }
    *uniform = (long long)div[0];
    for (int i = 1; i < kIntervals; i++)
        if (div[i] != div[0]) *uniform = -1;
    return VRAM_OK;
}

/* Applies key:value with vram's parser; its error is re-worded to name PyTorch's variable. */
vram_status apply(const std::string &var, const std::string &key, const std::string &value, vram_alloc_config *cfg) {
    std::string pair = key + ":" + value;
    if (vram_alloc_config_parse(pair.c_str(), cfg) == VRAM_OK) return VRAM_OK;
    const char *why = vram_last_error();
    const char *prefix = "VRAM_ALLOC_CONF: ";
    if (!strncmp(why, prefix, strlen(prefix))) why += strlen(prefix);
    std::string msg = why;
    return vram_error(VRAM_ERR_INVALID_ARG, "%s: %s", var.c_str(), msg.c_str());
}

void note(std::string *notes, const std::string &text) {
    *notes += notes->empty() ? text : "; " + text;
}

/* Applies one option to `work` (what it leaves out goes to `said`); an error for a bad value. */
vram_status apply_option(const std::string &var, const Option &o, vram_alloc_config *work, std::string *said) {
    const std::string &k = o.key, &v = o.value;
    vram_status st = VRAM_OK;
    if (k == "expandable_segments" || k == "max_split_size_mb" || k == "max_non_split_rounding_mb" ||
        k == "garbage_collection_threshold" || (k == "roundup_power2_divisions" && v[0] != '[')) {
        st = apply(var, k, v, work);
    } else if (k == "roundup_power2_divisions") {
        long long uniform = 0;
        if ((st = roundup_list(var, v, &uniform)) == VRAM_OK) {
            if (uniform >= 0) st = apply(var, k, std::to_string(uniform), work);
            else note(said, var + "'s roundup_power2_divisions:" + v + " left out: vram rounds every size with one "
                                  "count (VRAM_ALLOC_CONF=roundup_power2_divisions:N)");
        }
    } else if (k == "per_process_memory_fraction") {
        st = apply(var, "memory_fraction", v, work);
    } else if (k.rfind("pinned_", 0) == 0) {
        /* PyTorch's pinned host allocator still runs and still reads these */
    } else if (k == "backend") {
        if (v != "native") note(said, var + "'s backend:" + v + " left out: vram is the CUDA allocator now");
    } else if (k == "release_lock_on_cudamalloc" || k == "release_lock_on_hipmalloc" ||
               k == "graph_capture_record_stream_reuse") {
        note(said, var + "'s " + k + ":" + v + " left out: no counterpart in vram");
    } else {
        note(said, var + "'s " + k + ":" + v + " left out: not an option of PyTorch's CUDA allocator");
    }
    return st;
}

}  // namespace

vram_status torch_conf_apply(const char *source, const std::string &text, vram_alloc_config *cfg, std::string *notes) {
    std::vector<Option> all;
    vram_status st = split_options(source, text, &all);
    if (st != VRAM_OK) return st;
    std::string var = source, said;
    vram_alloc_config work = *cfg;
    for (const Option &o : all) /* every value checked, as PyTorch's parser checks each */
        if ((st = apply_option(var, o, &work, &said)) != VRAM_OK) return st;
    work = *cfg;
    said.clear();
    bool split_given = false;
    for (const Option &o : last_of_each(all)) {
        apply_option(var, o, &work, &said);
        split_given |= o.key == "max_split_size_mb";
    }
    if (split_given && work.expandable_segments)
        note(&said, var + "'s max_split_size_mb applies to vram's segments model only (add "
                    "expandable_segments:False); vram's default pages model ignores it, as PyTorch's expandable "
                    "segments do");
    if (!said.empty()) note(notes, said);
    *cfg = work;
    return VRAM_OK;
}

std::string torch_conf_merge(const std::string &earlier, const std::string &later) {
    std::vector<Option> options;
    if (split_options(kSettingsSource, earlier + "," + later, &options) != VRAM_OK) return earlier + "," + later;
    std::string out;
    for (const Option &o : last_of_each(options)) out += (out.empty() ? "" : ",") + o.key + ":" + o.value;
    return out;
}

vram_status torch_alloc_config(vram_alloc_config *cfg, std::string *notes, const std::string &settings) {
    notes->clear();
    std::string vram_conf = env_value("VRAM_ALLOC_CONF");
    /* PyTorch 2.11's CUDA allocator reads PYTORCH_CUDA_ALLOC_CONF, and PYTORCH_ALLOC_CONF where
     * that is unset (run 134 on the H200: with both set, its expandable segments follow the first) */
    const char *var = "PYTORCH_CUDA_ALLOC_CONF";
    std::string text = env_value(var), other = env_value("PYTORCH_ALLOC_CONF");
    if (text.empty()) {
        var = "PYTORCH_ALLOC_CONF";
        text = other;
    }
    std::string no_caching = env_value("PYTORCH_NO_CUDA_MEMORY_CACHING");
    vram_alloc_config work;
    vram_alloc_config_default(&work);
    vram_status st;
    if (!vram_conf.empty()) {
        if ((st = vram_alloc_config_parse(vram_conf.c_str(), &work)) != VRAM_OK) return st;
        if (!text.empty()) note(notes, std::string(var) + " (" + text + ") left out: VRAM_ALLOC_CONF is set, and vram reads that");
        if (!no_caching.empty()) note(notes, "PYTORCH_NO_CUDA_MEMORY_CACHING left out: VRAM_ALLOC_CONF is set (caching:False there)");
    } else {
        if (!other.empty() && var == std::string("PYTORCH_CUDA_ALLOC_CONF") && other != text)
            note(notes, "PYTORCH_ALLOC_CONF (" + other + ") left out: PYTORCH_CUDA_ALLOC_CONF is set, and PyTorch reads that");
        if ((st = torch_conf_apply(var, text, &work, notes)) != VRAM_OK) return st;
        if (no_caching == "1") {
            if ((st = apply("PYTORCH_NO_CUDA_MEMORY_CACHING", "caching", "False", &work)) != VRAM_OK) return st;
        } else if (!no_caching.empty() && no_caching != "0") {
            note(notes, "PYTORCH_NO_CUDA_MEMORY_CACHING=" + no_caching + " left out: not 0 or 1 (PyTorch ignores it too)");
        }
    }
    /* the program's own torch.cuda.memory._set_allocator_settings calls come last, as in PyTorch */
    if ((st = torch_conf_apply(kSettingsSource, settings, &work, notes)) != VRAM_OK) return st;
    *cfg = work;
    return VRAM_OK;
}
