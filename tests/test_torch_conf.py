"""test_torch_conf.py — PyTorch's allocator settings under vram (src/torch/torch_conf.cpp), through
libvram_torch.so's C interface over the fake driver, without PyTorch or a GPU:
- what each PYTORCH_CUDA_ALLOC_CONF / PYTORCH_ALLOC_CONF / PYTORCH_NO_CUDA_MEMORY_CACHING setting
  becomes (vram_torch_alloc_conf before any allocator starts, read from the environment each
  call), which settings are named as left out and why (vram_torch_alloc_conf_notes), and that
  VRAM_ALLOC_CONF, where set, wins;
- bad strings and values: an error naming the variable, the option and the value, from
  vram_torch_check_config too (enable() raises it before PyTorch's allocator is swapped);
- torch.cuda.memory._set_allocator_settings (vram_torch_set_allocator_settings): applied on top
  of the environment to allocators that start later, refused when bad, named per device where an
  allocator has started;
- caching_allocator_enable (vram_torch_set_caching) for allocators that have not started;
- in a child process, as a program runs: allocators started on two devices take the settings of
  the moment (a script that sets PYTORCH_ALLOC_CONF before its first CUDA tensor is honoured),
  the notes are printed once, and a later change of the environment does not touch a started
  allocator.
Usage: test_torch_conf.py LIBVRAM_TORCH FAKE_LIBCUDA
"""
import ctypes
import os
import subprocess
import sys
import time

if os.environ.get("VRAM_TEST_SANITIZED") and not os.environ.get("VRAM_TEST_PRELOADED"):
    print("SKIP: the sanitizer build's library cannot be loaded into an uninstrumented python "
          "without the sanitizers' runtimes preloaded (tests/extra.cmake)")
    sys.exit(77)
lib_path, fake = sys.argv[1], sys.argv[2]
VARS = ("VRAM_ALLOC_CONF", "PYTORCH_ALLOC_CONF", "PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_NO_CUDA_MEMORY_CACHING")
for v in VARS:
    os.environ.pop(v, None)
os.environ.update({"VRAM_LIBCUDA": fake, "FAKE_CUDA_MEMORY": str(1 << 30), "FAKE_CUDA_DEVICES": "2"})
lib = ctypes.CDLL(lib_path)
vp, c_int = ctypes.c_void_p, ctypes.c_int
lib.vram_torch_alloc_conf.restype, lib.vram_torch_alloc_conf.argtypes = vp, [c_int]
lib.vram_torch_alloc_conf_notes.restype, lib.vram_torch_alloc_conf_notes.argtypes = vp, []
lib.vram_torch_set_allocator_settings.restype = vp
lib.vram_torch_set_allocator_settings.argtypes = [ctypes.c_char_p]
lib.vram_torch_string_free.argtypes = [vp]
lib.vram_torch_last_error.restype = ctypes.c_char_p
lib.vram_torch_alloc.restype, lib.vram_torch_alloc.argtypes = vp, [ctypes.c_ssize_t, c_int, vp]
lib.vram_torch_free.restype, lib.vram_torch_free.argtypes = None, [vp, ctypes.c_ssize_t, c_int, vp]
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pycheck import check, done, take_string  # noqa: E402


def take(ptr):
    return take_string(lib, ptr)


def settle(env):
    """The configuration and notes an allocator starting now would have, under env alone."""
    for v in VARS:
        os.environ.pop(v, None)
    os.environ.update(env)
    conf = take(lib.vram_torch_alloc_conf(0))
    notes = take(lib.vram_torch_alloc_conf_notes())
    conf_dict = dict(item.split(":", 1) for item in conf.split(",")) if conf else None
    return conf_dict, notes


def set_settings(text):
    """vram_torch_set_allocator_settings (torch.cuda.memory._set_allocator_settings): its notes, or
    None with the error."""
    return take(lib.vram_torch_set_allocator_settings(text.encode()))


def finish_settings_child(ptr):
    """The end of a settings child: cuda:1's allocator starts (after the calls), both devices'
    options are printed, the blocks freed."""
    ptr1 = lib.vram_torch_alloc(1 << 20, 1, None)
    print("conf0", take(lib.vram_torch_alloc_conf(0)))
    print("conf1", take(lib.vram_torch_alloc_conf(1)))
    lib.vram_torch_free(ptr, 1 << 20, 0, None)
    lib.vram_torch_free(ptr1, 1 << 20, 1, None)
    sys.exit(0)


def run_child(mode):
    """This file run as a child in `mode`, without the variables of VARS: the run and its output
    lines as {first word: rest}."""
    run = subprocess.run([sys.executable, os.path.abspath(__file__), lib_path, fake, mode],
                         env={k: v for k, v in os.environ.items() if k not in VARS}, capture_output=True, text=True,
                         timeout=120)
    return run, dict(l.split(" ", 1) for l in run.stdout.splitlines() if " " in l)


if "--child" in sys.argv:
    # A program's run: PyTorch's settings as the script set them before its first CUDA tensor.
    os.environ["PYTORCH_ALLOC_CONF"] = "expandable_segments:False, backend:cudaMallocAsync"
    blocks = [(lib.vram_torch_alloc(1 << 20, d, None), d) for d in (0, 1)]
    os.environ["PYTORCH_ALLOC_CONF"] = "expandable_segments:True"  # too late for started allocators
    for d in (0, 1):
        print("conf%d %s" % (d, take(lib.vram_torch_alloc_conf(d))))
    for ptr, d in blocks:
        lib.vram_torch_free(ptr, 1 << 20, d, None)
    print("allocated", all(ptr for ptr, _ in blocks))
    sys.exit(0)

if "--child-segments" in sys.argv:
    # VRAM_ALLOC_CONF=expandable_segments:False: cuda:0 starts in the segments model, which cannot
    # turn pages on later; cuda:1, started after the call, takes it
    os.environ["VRAM_ALLOC_CONF"] = "expandable_segments:False"  # (the module cleared the variables)
    ptr = lib.vram_torch_alloc(1 << 20, 0, None)
    print("pages:", set_settings("expandable_segments:True,roundup_power2_divisions:2"))
    finish_settings_child(ptr)

if "--child-settings" in sys.argv:
    # _set_allocator_settings while cuda:0's allocator runs and cuda:1's has not started
    ptr = lib.vram_torch_alloc(1 << 20, 0, None)
    print("same:", set_settings("expandable_segments:True"))  # what cuda:0 runs already: nothing to say
    print("late:", set_settings("garbage_collection_threshold:0.5,roundup_power2_divisions:4"))
    print("model:", set_settings("expandable_segments:False"))  # cuda:0's new memory: segments
    print("conf0off", take(lib.vram_torch_alloc_conf(0)))
    print("back:", set_settings("expandable_segments:True"))
    finish_settings_child(ptr)

default, notes = settle({})
check(default and default["expandable_segments"] == "True" and notes == "", "no settings: vram's defaults, no notes")

conf, notes = settle({"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"})
check(conf == default and notes == "", "expandable_segments:True is vram's default: nothing to say")

conf, notes = settle({"PYTORCH_CUDA_ALLOC_CONF": "max_split_size_mb:128, garbage_collection_threshold:0.6"})
check(conf["max_split_size_mb"] == "128" and conf["garbage_collection_threshold"] == "0.6",
      "max_split_size_mb and garbage_collection_threshold applied (spaces dropped, as PyTorch drops them)")
check("max_split_size_mb applies to vram's segments model only" in notes,
      "max_split_size_mb without expandable_segments:False: the note says the pages model ignores it")

conf, notes = settle({"PYTORCH_ALLOC_CONF": "expandable_segments:False,max_split_size_mb:256,max_non_split_rounding_mb:64,"
                                            "backend:cudaMallocAsync,pinned_use_cuda_host_register:True,"
                                            "pinned_num_register_threads:8"})
check(conf["expandable_segments"] == "False" and conf["max_split_size_mb"] == "256"
      and conf["max_non_split_rounding_mb"] == "64", "segments model with PyTorch's split rules")
check(notes == "PYTORCH_ALLOC_CONF's backend:cudaMallocAsync left out: vram is the CUDA allocator now",
      "backend named as left out; the pinned_* options stay PyTorch's without a note: %r" % notes)
conf, notes = settle({"PYTORCH_ALLOC_CONF": "backend:native"})
check(conf == default and notes == "", "backend:native: nothing left out")

for text, divisions in (("4", "4"), ("[>:8]", "8"), ("[1:2,>:2]", "2"), ("[32768:2]", "2")):
    conf, notes = settle({"PYTORCH_ALLOC_CONF": "roundup_power2_divisions:" + text})
    check(conf["roundup_power2_divisions"] == divisions and notes == "",
          "roundup_power2_divisions:%s gives every size %s divisions" % (text, divisions))
conf, notes = settle({"PYTORCH_ALLOC_CONF": "roundup_power2_divisions:[256:1,512:2,1024:4,>:8]"})
check(conf["roundup_power2_divisions"] == "0" and "roundup_power2_divisions:[256:1,512:2,1024:4,>:8] left out" in notes,
      "divisions that differ by size: left out, named")
conf, notes = settle({"PYTORCH_ALLOC_CONF": "roundup_power2_divisions:[64:4]"})
check(conf["roundup_power2_divisions"] == "0" and "left out" in notes,
      "[64:4]: by PyTorch's rule sizes above the 64 MB interval keep 0 divisions, so left out too")

conf, notes = settle({"PYTORCH_ALLOC_CONF": "roundup_power2_divisions:[>:4],roundup_power2_divisions:[64:4]"})
check(conf["roundup_power2_divisions"] == "0" and "[64:4] left out" in notes and "[>:4]" not in notes,
      "an option given twice counts once, with its last value, even one vram leaves out: %s" % notes)
conf, notes = settle({"PYTORCH_ALLOC_CONF": "max_split_size_mb:128,garbage_collection_threshold:0.5,max_split_size_mb:256"})
check(conf["max_split_size_mb"] == "256" and conf["garbage_collection_threshold"] == "0.5", "the last value wins")
t0 = time.time()  # a variable of 200,000 options: read in linear time (a quadratic merge took minutes)
conf, notes = settle({"PYTORCH_ALLOC_CONF": ",".join("garbage_collection_threshold:0.%d,no_such_%d:1" % (1 + i % 9, i)
                                                    for i in range(100000))})
check(time.time() - t0 < 10 and conf["garbage_collection_threshold"] == "0.%d" % (1 + 99999 % 9) and "no_such_99999" in notes,
      "200,000 options read in %.2f s" % (time.time() - t0))

conf, notes = settle({"PYTORCH_ALLOC_CONF": "per_process_memory_fraction:0.5,release_lock_on_cudamalloc:True,"
                                            "graph_capture_record_stream_reuse:True,no_such_option:1"})
check(conf["memory_fraction"] == "0.5", "per_process_memory_fraction becomes memory_fraction")
for what in ("release_lock_on_cudamalloc:True left out: no counterpart", "graph_capture_record_stream_reuse:True left out",
             "no_such_option:1 left out: not an option of PyTorch's CUDA allocator"):
    check(what in notes, "named: " + what)

conf, notes = settle({"PYTORCH_CUDA_ALLOC_CONF": "garbage_collection_threshold:0.7",
                      "PYTORCH_ALLOC_CONF": "expandable_segments:False"})
check(conf["garbage_collection_threshold"] == "0.7" and conf["expandable_segments"] == "True",
      "PYTORCH_CUDA_ALLOC_CONF read first, as PyTorch 2.11 reads it (tests/gpu/test_torch_plugin.py asks PyTorch)")
check("PYTORCH_ALLOC_CONF (expandable_segments:False) left out: PYTORCH_CUDA_ALLOC_CONF is set" in notes,
      "the other variable named: %r" % notes)
conf, notes = settle({"PYTORCH_ALLOC_CONF": "garbage_collection_threshold:0.7"})
check(conf["garbage_collection_threshold"] == "0.7", "PYTORCH_ALLOC_CONF where PYTORCH_CUDA_ALLOC_CONF is unset")

conf, notes = settle({"VRAM_ALLOC_CONF": "history:10", "PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:False",
                      "PYTORCH_NO_CUDA_MEMORY_CACHING": "1"})
check(conf["history"] == "10" and conf["expandable_segments"] == "True" and conf["caching"] == "True",
      "VRAM_ALLOC_CONF set: PyTorch's settings are not applied")
check("PYTORCH_CUDA_ALLOC_CONF (expandable_segments:False) left out: VRAM_ALLOC_CONF is set" in notes
      and "PYTORCH_NO_CUDA_MEMORY_CACHING left out" in notes, "and named: %r" % notes)
# the configuration bench/run_placement_gpu.sh measures beside plain vram (ALLOCS="vram:CONF")
conf, notes = settle({"VRAM_ALLOC_CONF": "chunk_size_mb:32,move_min_mb:64"})
check(conf["chunk_size_mb"] == "32" and conf["move_min_mb"] == "64" and conf["expandable_segments"] == "True"
      and notes == "", "the placement script's configuration reaches the allocator: %r" % conf)
conf, notes = settle({"VRAM_ALLOC_CONF": "", "PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:False"})
check(conf["expandable_segments"] == "False", "an empty VRAM_ALLOC_CONF counts as unset")

conf, notes = settle({"PYTORCH_NO_CUDA_MEMORY_CACHING": "1"})
check(conf["caching"] == "False" and notes == "", "PYTORCH_NO_CUDA_MEMORY_CACHING=1: caching:False")
conf, notes = settle({"PYTORCH_NO_CUDA_MEMORY_CACHING": "0"})
check(conf == default and notes == "", "PYTORCH_NO_CUDA_MEMORY_CACHING=0: caching stays on")
conf, notes = settle({"PYTORCH_NO_CUDA_MEMORY_CACHING": "yes"})
check(conf == default and "PYTORCH_NO_CUDA_MEMORY_CACHING=yes left out: not 0 or 1" in notes,
      "another value: ignored, as PyTorch ignores it, and named")

# Bad input: one error naming the variable, the option and the value, from the check enable() makes.
for env, expect in (
        ({"PYTORCH_ALLOC_CONF": "max_split_size_mb:abc"}, "PYTORCH_ALLOC_CONF: max_split_size_mb: 'abc'"),
        ({"PYTORCH_ALLOC_CONF": "max_split_size_mb:4"}, "PYTORCH_ALLOC_CONF: max_split_size_mb: 4 is too small"),
        ({"PYTORCH_ALLOC_CONF": "max_split_size_mb:abc,max_split_size_mb:128"}, "max_split_size_mb: 'abc'"),
        ({"PYTORCH_CUDA_ALLOC_CONF": "garbage_collection_threshold:1.5"}, "PYTORCH_CUDA_ALLOC_CONF: garbage_collection_threshold"),
        ({"PYTORCH_ALLOC_CONF": "expandable_segments:maybe"}, "PYTORCH_ALLOC_CONF: expandable_segments: 'maybe'"),
        ({"PYTORCH_ALLOC_CONF": "expandable_segments"}, "PYTORCH_ALLOC_CONF: 'expandable_segments' is not key:value"),
        ({"PYTORCH_ALLOC_CONF": "per_process_memory_fraction:2"}, "PYTORCH_ALLOC_CONF: memory_fraction: '2'"),
        ({"PYTORCH_ALLOC_CONF": "roundup_power2_divisions:[256:3]"}, "roundup_power2_divisions: '256:3'"),
        ({"PYTORCH_ALLOC_CONF": "roundup_power2_divisions:[3:2]"}, "roundup_power2_divisions: '3' is not a power of two"),
        ({"PYTORCH_ALLOC_CONF": "roundup_power2_divisions:[256:1"}, "unbalanced '['"),
        ({"PYTORCH_ALLOC_CONF": "roundup_power2_divisions:256:1]"}, "unbalanced ']'"),
        ({"VRAM_ALLOC_CONF": "history:x", "PYTORCH_ALLOC_CONF": "expandable_segments:True"}, "VRAM_ALLOC_CONF: history")):
    conf, _ = settle(env)
    error = lib.vram_torch_last_error().decode()
    check(conf is None and expect in error, "%s: error %r names %r" % (env, error, expect))
    check(lib.vram_torch_check_config() == -1 and expect in lib.vram_torch_last_error().decode(),
          "%s: vram_torch_check_config refuses it too" % env)
settle({})
check(lib.vram_torch_check_config() == 0, "a good environment passes the check again")

# torch.cuda.memory._set_allocator_settings before any allocator starts: applied on top of the
# environment (later calls win, as in PyTorch), bad strings refused and not kept.
settle({"PYTORCH_CUDA_ALLOC_CONF": "garbage_collection_threshold:0.7"})
check(set_settings("expandable_segments:False,backend:cudaMallocAsync")
      == "torch.cuda.memory._set_allocator_settings's backend:cudaMallocAsync left out: vram is the CUDA allocator now",
      "settings: what they leave out is returned")
conf, notes = settle({"PYTORCH_CUDA_ALLOC_CONF": "garbage_collection_threshold:0.7"})
check(conf["expandable_segments"] == "False" and conf["garbage_collection_threshold"] == "0.7",
      "settings apply on top of PYTORCH_CUDA_ALLOC_CONF: %s" % conf)
check(set_settings("max_split_size_mb:oops") is None
      and "torch.cuda.memory._set_allocator_settings: max_split_size_mb: 'oops'" in lib.vram_torch_last_error().decode(),
      "a bad value is refused, naming the call: %s" % lib.vram_torch_last_error().decode())
check(set_settings("expandable_segments:True") == "", "a later call wins")
conf, _ = settle({})
check(conf["expandable_segments"] == "True" and "max_split_size_mb" not in conf, "the refused string was not kept: %s" % conf)
conf, _ = settle({"VRAM_ALLOC_CONF": "expandable_segments:False"})
check(conf["expandable_segments"] == "True", "settings apply on top of VRAM_ALLOC_CONF too (PyTorch: the call beats the environment)")
check(lib.vram_torch_set_allocator_settings(None) is None, "null settings refused")
# a program that sets them over and over (every step): each option is kept once, with its last
# value, so calls stay cheap (joined, 20,000 calls would re-parse ~600 KB each: minutes)
t0 = time.time()
for i in range(20000):
    set_settings("garbage_collection_threshold:0.%d,expandable_segments:True" % (1 + i % 9))
conf, _ = settle({})
check(time.time() - t0 < 10 and conf["garbage_collection_threshold"] == "0.%d" % (1 + 19999 % 9),
      "20,000 calls in %.1f s, the last value in force: %s" % (time.time() - t0, conf.get("garbage_collection_threshold")))
set_settings("expandable_segments:True")
settle({})
run, lines = run_child("--child-settings")
check(run.returncode == 0 and lines.get("same:") == "", "settings a started allocator already has: no note: %r %r"
      % (run.stdout, run.stderr[-300:]))
check(lines.get("late:") == "", "options a started allocator can change: applied, nothing to say: %r" % lines.get("late:"))
check(lines.get("model:") == "" and "expandable_segments:False" in lines.get("conf0off", "") and lines.get("back:") == "",
      "expandable_segments switched on a started allocator, quietly, as PyTorch does for new segments: %r" % lines)
check(all("garbage_collection_threshold:0.5" in lines.get(c, "") and "roundup_power2_divisions:4" in lines.get(c, "")
          and "expandable_segments:True" in lines.get(c, "") for c in ("conf0", "conf1")),
      "cuda:0, running, and cuda:1, started after the call, both take the settings: %r" % lines)

run, lines = run_child("--child-segments")
check(run.returncode == 0 and "expandable_segments:True left out on cuda:0" in lines.get("pages:", "")
      and "segments model" in lines.get("pages:", "") and "cuda:1" not in lines.get("pages:", ""),
      "pages for an allocator started in the segments model: named, for that device only: %r %r"
      % (lines.get("pages:"), run.stderr[-300:]))
check("expandable_segments:False" in lines.get("conf0", "") and "roundup_power2_divisions:2" in lines.get("conf0", "")
      and "expandable_segments:True" in lines.get("conf1", ""),
      "cuda:0 keeps segments and takes the rest; cuda:1, started after, takes pages: %r" % lines)

# A program's run, in a child: settings read when each allocator starts, notes printed once.
run, _ = run_child("--child")
out, err = run.stdout, run.stderr
check(run.returncode == 0 and "allocated True" in out, "the child allocated on two devices: %s %s" % (out, err))
check(out.count("expandable_segments:False") == 2, "both devices' allocators took the settings of their start: %s" % out)
check(err.count("backend:cudaMallocAsync left out") == 1, "the note printed once a process: %r" % err)
# caching_allocator_enable(False) before any allocator starts: those that start later do not cache
lib.vram_torch_set_caching.argtypes = [c_int]
settle({})
check(lib.vram_torch_set_caching(0) == 0 and settle({})[0]["caching"] == "False",
      "caching_allocator_enable(False) holds for allocators that start later")
check(lib.vram_torch_set_caching(1) == 0 and settle({"PYTORCH_NO_CUDA_MEMORY_CACHING": "1"})[0]["caching"] == "True",
      "and its last word wins over the environment, as PyTorch's call does")
sys.exit(done("test_torch_conf"))
