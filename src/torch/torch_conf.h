/* torch_conf.h — the configuration the plug-in's allocators start with: VRAM_ALLOC_CONF where it
 * is set, else the options of PyTorch's own allocator configuration (PYTORCH_CUDA_ALLOC_CONF or
 * PYTORCH_ALLOC_CONF, PYTORCH_NO_CUDA_MEMORY_CACHING) that vram shares, so that a script
 * run under vram keeps the settings its user gave PyTorch. torch_conf.cpp says what maps to what.
 */
#ifndef VRAM_TORCH_CONF_H
#define VRAM_TORCH_CONF_H

#include <string>

extern "C" {
#include "vram/config.h"
}

/* Reads the environment now. On success fills `cfg` (defaults plus what applies) and `notes`
 * with one line saying which settings of PyTorch's were left out and why (empty when none), and
 * returns VRAM_OK; on a malformed string or a bad value returns the error naming the variable,
 * the option and the value, `cfg` untouched. */
vram_status torch_alloc_config(vram_alloc_config *cfg, std::string *notes);

#endif
