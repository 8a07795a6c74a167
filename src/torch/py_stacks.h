/* py_stacks.h — the Python call stacks behind allocations, for vram_torch's memory snapshots
 * (py_stacks.cpp says how they are gathered). Internal to libvram_torch.so. */
#ifndef VRAM_PY_STACKS_H
#define VRAM_PY_STACKS_H

#include <cstddef>
#include <cstdint>
#include <string>

namespace py_stacks {

/* Whether this process has a Python interpreter whose stacks can be read ("" if so; else why
 * not, for an error message). */
const char *unavailable();

/* The calling thread's Python stack as an interned id (1, 2, ...; equal stacks share one), or 0
 * when it has none (no Python in the process, a thread that never ran Python, an interpreter
 * shutting down, or the table of stacks full). Takes the GIL while it reads the frames. */
uint32_t gather();

/* Ids of the blocks allocated while stacks were gathered, by address. */
void block_set(uint64_t addr, uint32_t id);
void block_drop(uint64_t addr);
uint32_t block_get(uint64_t addr); /* 0: none known */
void blocks_clear();

/* JSON object {"<id>": [{"filename", "line", "name"}, ...], ...} of the given ids' frames,
 * innermost first, as PyTorch's snapshots list them (unknown ids and 0 are left out). */
std::string frames_json(const uint32_t *ids, size_t n);

/* How many distinct stacks are interned, and how many gathers found the table full. */
size_t count();
uint64_t dropped();

} // namespace py_stacks

#endif
