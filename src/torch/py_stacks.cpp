/* py_stacks.cpp — the Python call stacks behind allocations, for vram_torch's memory snapshots.
 *
 * torch.cuda.memory._record_memory_history(stacks="python") asks PyTorch's allocator to keep
 * the Python stack of every allocation, which memory_viz and _memory_viz show. Under vram an
 * allocation reaches vram_torch_alloc from PyTorch's C++ with nothing of Python in reach, so
 * this file reads the calling thread's Python frames itself, through the CPython API of the
 * process it is loaded into: the functions are found with dlsym at run time, so the library
 * links no Python and, in a process without one, gathers nothing. As PyTorch's own recorder
 * does, it takes the GIL while it walks the frames (the thread has usually released it inside
 * the operator); a thread that has never run Python (no thread state) has no stack and is not
 * made to take the GIL. Python 3.9 or newer (PyFrame_GetBack / PyFrame_GetCode).
 *
 * A stack is the list of (code object, line) from the innermost frame out, at most kMaxDepth
 * frames. Stacks are interned: equal stacks share one id (1, 2, ...), which vram's history
 * events carry as their context and which blocks keep by address (block_set); at most
 * kMaxStacks distinct stacks, then gather() answers 0 and counts the miss. A code object is
 * named (co_filename, co_name) the first time it is seen and held with a reference, so its
 * address names it for good; names are kept as UTF-8 strings, so frames_json needs no GIL.
 */
#include "py_stacks.h"

#include "vram/vram.h"

#include <dlfcn.h>

#include <cstdio>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace py_stacks {
namespace {

constexpr size_t kMaxDepth = 128;
constexpr size_t kMaxStacks = 1u << 20;

/* The CPython functions used, found in the running process (opaque object pointers). */
struct Api {
    int (*IsInitialized)(void);
    int (*IsFinalizing)(void); /* Py_IsFinalizing (3.13+) or _Py_IsFinalizing */
    void *(*ThisThreadState)(void);
    int (*GilEnsure)(void); /* PyGILState_STATE is an enum */
    void (*GilRelease)(int);
    void *(*ThreadFrame)(void *tstate); /* new references */
    void *(*FrameBack)(void *frame);
    void *(*FrameCode)(void *frame);
    int (*FrameLine)(void *frame);
    void *(*GetAttr)(void *obj, const char *name);
    const char *(*Utf8)(void *str);
    void (*DecRef)(void *obj);
    /* the thread's pending exception set aside and restored: PyErr_Fetch / PyErr_Restore, or
     * where a Python has dropped them, PyErr_GetRaisedException / PyErr_SetRaisedException */
    void (*ErrFetch)(void **type, void **value, void **traceback);
    void (*ErrRestore)(void *type, void *value, void *traceback);
    void *(*ErrTake)(void);
    void (*ErrPut)(void *exception);
};

Api g_api;
const char *g_unavailable = "not looked for yet";
std::once_flag g_once;

template <typename F> bool find(F &fn, const char *name, const char *fallback = nullptr) {
    void *p = dlsym(RTLD_DEFAULT, name);
    if (!p && fallback) p = dlsym(RTLD_DEFAULT, fallback);
    fn = reinterpret_cast<F>(p);
    return p != nullptr;
}

void load() {
    Api a{};
    bool ok = find(a.IsInitialized, "Py_IsInitialized") && find(a.ThisThreadState, "PyGILState_GetThisThreadState") &&
              find(a.GilEnsure, "PyGILState_Ensure") && find(a.GilRelease, "PyGILState_Release") &&
              find(a.FrameLine, "PyFrame_GetLineNumber") && find(a.GetAttr, "PyObject_GetAttrString") &&
              find(a.Utf8, "PyUnicode_AsUTF8") && find(a.DecRef, "Py_DecRef") &&
              ((find(a.ErrFetch, "PyErr_Fetch") && find(a.ErrRestore, "PyErr_Restore")) ||
               (find(a.ErrTake, "PyErr_GetRaisedException") && find(a.ErrPut, "PyErr_SetRaisedException")));
    if (!ok) {
        g_unavailable = "no Python interpreter in this process";
        return;
    }
    if (!find(a.ThreadFrame, "PyThreadState_GetFrame") || !find(a.FrameBack, "PyFrame_GetBack") ||
        !find(a.FrameCode, "PyFrame_GetCode")) {
        g_unavailable = "this Python is older than 3.9 (no PyFrame_GetBack / PyFrame_GetCode)";
        return;
    }
    find(a.IsFinalizing, "Py_IsFinalizing", "_Py_IsFinalizing"); /* optional */
    if (!a.ErrFetch || !a.ErrRestore) a.ErrFetch = nullptr, a.ErrRestore = nullptr; /* the pair, or the other pair */
    g_api = a;
    g_unavailable = "";
}

const Api *api() {
    std::call_once(g_once, load);
    return *g_unavailable ? nullptr : &g_api;
}

struct CodeName {
    std::string filename, name;
};

std::mutex g_lock; /* the tables below */
std::unordered_map<void *, uint32_t> g_code_index;
std::vector<CodeName> g_codes;
std::unordered_map<std::string, uint32_t> g_stack_ids; /* the frames' bytes -> id */
std::vector<std::vector<uint64_t>> g_stacks;             /* id - 1 -> (code index << 32 | line) */
uint64_t g_dropped;

std::mutex g_blocks_lock;
std::unordered_map<uint64_t, uint32_t> g_blocks;

/* A UTF-8 copy of a str attribute of `obj` ("?" if it has none). GIL held, no error pending. */
std::string attr_text(const Api *p, void *obj, const char *attr) {
    std::string out = "?";
    if (void *v = p->GetAttr(obj, attr)) {
        if (const char *s = p->Utf8(v)) out = s;
        p->DecRef(v);
    }
    return out;
}

/* The index of a code object, named on first sight; takes over the caller's reference (kept
 * for a new code object, dropped otherwise). GIL held. */
uint32_t code_index(const Api *p, void *code) {
    {
        std::lock_guard<std::mutex> lock(g_lock);
        auto it = g_code_index.find(code);
        if (it != g_code_index.end()) {
            p->DecRef(code);
            return it->second;
        }
    }
    /* The thread may be in the middle of an exception (a tensor freed while one unwinds): set it
     * aside for the lookups, then put it back (which also clears any error they raised). */
    void *type = nullptr, *value = nullptr, *tb = nullptr, *raised = nullptr;
    if (p->ErrFetch) p->ErrFetch(&type, &value, &tb);
    else raised = p->ErrTake();
    CodeName name{attr_text(p, code, "co_filename"), attr_text(p, code, "co_name")};
    if (p->ErrFetch) {
        p->ErrRestore(type, value, tb);
    } else {
        p->ErrPut(raised); /* replaces (and so clears) any error the lookups raised */
    }
    std::lock_guard<std::mutex> lock(g_lock);
    uint32_t i = (uint32_t)g_codes.size();
    g_codes.push_back(std::move(name));
    g_code_index.emplace(code, i);
    return i;
}

/* The id of a stack of n frames (0 when the table is full). */
uint32_t intern(const uint64_t *frames, size_t n) {
    std::string key(reinterpret_cast<const char *>(frames), n * sizeof *frames);
    std::lock_guard<std::mutex> lock(g_lock);
    auto it = g_stack_ids.find(key);
    if (it != g_stack_ids.end()) return it->second;
    if (g_stacks.size() >= kMaxStacks) {
        g_dropped++;
        return 0;
    }
    g_stacks.emplace_back(frames, frames + n);
    uint32_t id = (uint32_t)g_stacks.size();
    g_stack_ids.emplace(std::move(key), id);
    return id;
}

void json_string(std::string &out, const std::string &s) {
    vram_json_escape(s.c_str(), s.size(), [](void *sink, const char *bytes, size_t n) {
        static_cast<std::string *>(sink)->append(bytes, n);
    }, &out);
}

} // namespace

const char *unavailable() {
    api();
    return g_unavailable;
}

uint32_t gather() {
    const Api *p = api();
    if (!p || !p->IsInitialized() || (p->IsFinalizing && p->IsFinalizing())) return 0;
    void *tstate = p->ThisThreadState();
    if (!tstate) return 0; /* a thread that never ran Python: nothing to read, no GIL to take */
    int gil = p->GilEnsure();
    uint64_t frames[kMaxDepth];
    size_t n = 0;
    void *f = p->ThreadFrame(tstate);
    try { /* the tables may fail to grow (host out of memory): then no stack, never an exception,
           * which from a tensor's deleter would end the process */
        while (f && n < kMaxDepth) {
            int line = p->FrameLine(f);
            uint32_t code = code_index(p, p->FrameCode(f));
            frames[n++] = (uint64_t)code << 32 | (uint32_t)line;
            void *back = p->FrameBack(f);
            p->DecRef(f);
            f = back;
        }
    } catch (...) {
        n = 0;
    }
    if (f) p->DecRef(f);
    p->GilRelease(gil);
    try {
        return n ? intern(frames, n) : 0;
    } catch (...) {
        return 0;
    }
}

void block_set(uint64_t addr, uint32_t id) {
    std::lock_guard<std::mutex> lock(g_blocks_lock);
    try {
        g_blocks[addr] = id;
    } catch (...) { /* out of host memory: the block goes without its stack */
    }
}

void block_drop(uint64_t addr) {
    std::lock_guard<std::mutex> lock(g_blocks_lock);
    g_blocks.erase(addr);
}

uint32_t block_get(uint64_t addr) {
    std::lock_guard<std::mutex> lock(g_blocks_lock);
    auto it = g_blocks.find(addr);
    return it == g_blocks.end() ? 0 : it->second;
}

void blocks_clear() {
    std::lock_guard<std::mutex> lock(g_blocks_lock);
    g_blocks.clear();
}

std::string frames_json(const uint32_t *ids, size_t n) {
    std::string out = "{";
    std::lock_guard<std::mutex> lock(g_lock);
    std::vector<bool> done(g_stacks.size() + 1);
    for (size_t i = 0; i < n; i++) {
        uint32_t id = ids[i];
        if (id == 0 || id > g_stacks.size() || done[id]) continue;
        done[id] = true;
        if (out.size() > 1) out += ", ";
        out += '"' + std::to_string(id) + "\": [";
        const std::vector<uint64_t> &stack = g_stacks[id - 1];
        for (size_t k = 0; k < stack.size(); k++) {
            const CodeName &code = g_codes[stack[k] >> 32];
            out += k ? ", {\"filename\": " : "{\"filename\": ";
            json_string(out, code.filename);
            out += ", \"line\": " + std::to_string((int32_t)(uint32_t)stack[k]) + ", \"name\": ";
            json_string(out, code.name);
            out += '}';
        }
        out += ']';
    }
    out += '}';
    return out;
}

size_t count() {
    std::lock_guard<std::mutex> lock(g_lock);
    return g_stacks.size();
}

uint64_t dropped() {
    std::lock_guard<std::mutex> lock(g_lock);
    return g_dropped;
}

} // namespace py_stacks
