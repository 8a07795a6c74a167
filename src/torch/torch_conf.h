/* torch_conf.h — the configuration the plug-in's allocators start with: VRAM_ALLOC_CONF where it
 * is set, else the options of PyTorch's own allocator configuration (PYTORCH_CUDA_ALLOC_CONF or
 * PYTORCH_ALLOC_CONF, PYTORCH_NO_CUDA_MEMORY_CACHING) that vram shares, and on top of either what
 * the program gave torch.cuda.memory._set_allocator_settings, so that a script run under vram keeps
 * the settings its user gave PyTorch. torch_conf.cpp says what maps to what.
 */
#ifndef VRAM_TORCH_CONF_H
#define VRAM_TORCH_CONF_H

#include <string>

extern "C" {
#include "vram/config.h"
}

/* How notes and errors name settings that came through _set_allocator_settings. */
constexpr const char *kSettingsSource = "torch.cuda.memory._set_allocator_settings";

/* Applies a string in PyTorch's allocator-settings syntax (from `source`, which messages name) on
 * top of `cfg`: the options vram shares, with PyTorch's meaning; what it leaves out, and why, is
 * added to `notes` ("; "-separated). A malformed string or a bad value is an error naming
 * source, option and value, with `cfg` untouched. */
vram_status torch_conf_apply(const char *source, const std::string &text, vram_alloc_config *cfg, std::string *notes);

/* `later` after `earlier` (both PyTorch-syntax strings that parse) as one string in which each
 * option appears once, with its last value: what the program's repeated _set_allocator_settings
 * calls add up to, kept short however often it calls. */
std::string torch_conf_merge(const std::string &earlier, const std::string &later);

/* Reads the environment now, then applies `settings` (the program's _set_allocator_settings
 * strings, comma-joined). On success fills `cfg` (defaults plus what applies) and `notes` (empty
 * when nothing was left out); on error returns it, `cfg` untouched. */
vram_status torch_alloc_config(vram_alloc_config *cfg, std::string *notes, const std::string &settings);

#endif
