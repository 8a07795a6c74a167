/* test_alloc_config.c — the caching allocator's configuration, case by case: VRAM_ALLOC_CONF
 * parsed, refused with one clear message and formatted back (with the size parser and device
 * specs it relies on), the "auto" policies resolved by what the device can do, and settings
 * changed on a running allocator: caching off and on, the options PyTorch's settings reach
 * (vram_allocator_set_config, refused values and the capture rule) and expandable_segments
 * switched between the memory models. Each test_* function opens the devices and allocators it
 * needs (alloc_test_util.h) and closes them with the invariant checker; main runs them in order.
 */
#include <stdlib.h>

#include "alloc_test_util.h"
#include "vram/snapshot.h"

static void test_config(void) {
    vram_alloc_config c;
    vram_alloc_config_default(&c);
    CHECK_OK(vram_alloc_config_parse("expandable_segments:False, max_split_size_mb:256,memory_fraction:0.5,history:100", &c));
    CHECK(!c.expandable_segments && c.max_split_size == 256 * MiB && c.memory_fraction == 0.5 && c.history_entries == 100,
          "parsed");
    vram_alloc_config before = c;
    CHECK(vram_alloc_config_parse("max_split_size_mb:10", &c) == VRAM_ERR_INVALID_ARG, "below 20 MiB");
    CHECK(strstr(vram_last_error(), "max_split_size_mb: 10 is too small (at least 20)") != NULL, "names the key and "
          "the bound: %s", vram_last_error());
    /* too large, in MiB (bytes would not fit 64 bits) and above 2^64: said so, with the limit */
    CHECK(vram_alloc_config_parse("move_min_mb:99999999999999999", &c) == VRAM_ERR_INVALID_ARG &&
              strstr(vram_last_error(), "move_min_mb: 99999999999999999 is too large (at most 17592186044415)"),
          "a MiB value too large: %s", vram_last_error());
    CHECK(vram_alloc_config_parse("history:99999999999999999999", &c) == VRAM_ERR_INVALID_ARG &&
              strstr(vram_last_error(), "history: 99999999999999999999 is too large (above 2^64)"),
          "a value above 2^64: %s", vram_last_error());
    CHECK(vram_alloc_config_parse("colour:blue", &c) == VRAM_ERR_INVALID_ARG, "unknown key");
    CHECK(strstr(vram_last_error(), "unknown key 'colour'") != NULL, "names the unknown key: %s", vram_last_error());
    CHECK(vram_alloc_config_parse("memory_fraction:1.5", &c) == VRAM_ERR_INVALID_ARG, "fraction > 1");
    CHECK(vram_alloc_config_parse("garbage_collection_threshold:1", &c) == VRAM_ERR_INVALID_ARG, "gc = 1");
    CHECK(vram_alloc_config_parse("expandable_segments:maybe", &c) == VRAM_ERR_INVALID_ARG, "bad bool");
    CHECK(vram_alloc_config_parse("history:-1", &c) == VRAM_ERR_INVALID_ARG, "negative");
    CHECK(vram_alloc_config_parse("history:16777217", &c) == VRAM_ERR_INVALID_ARG, "history above its maximum");
    CHECK(strstr(vram_last_error(), "history") && strstr(vram_last_error(), "at most 16777216"), "names it: %s",
          vram_last_error());
    CHECK(vram_alloc_config_parse("roundup_power2_divisions:3", &c) == VRAM_ERR_INVALID_ARG, "not a power of two");
    CHECK(vram_alloc_config_parse("max_reserved", &c) == VRAM_ERR_INVALID_ARG, "no colon");
    CHECK(vram_alloc_config_parse("max_reserved:", &c) == VRAM_ERR_INVALID_ARG, "no value");
    CHECK(vram_alloc_config_parse("page_size_mb:6", &c) == VRAM_ERR_INVALID_ARG, "page not a power of two");
    CHECK(vram_alloc_config_parse("page_size_mb:2048", &c) == VRAM_ERR_INVALID_ARG &&
              strstr(vram_last_error(), "page_size_mb: 2048 is too large (at most 1024)"),
          "a page above 1 GiB is refused by name: %s", vram_last_error());
    CHECK(vram_alloc_config_parse("chunk_size_mb:131072", &c) == VRAM_ERR_INVALID_ARG, "a chunk above 64 GiB");
    vram_alloc_config largest;
    vram_alloc_config_default(&largest);
    CHECK_OK(vram_alloc_config_parse("page_size_mb:1024,chunk_size_mb:65536", &largest));
    CHECK(vram_alloc_config_parse("chunk_size_mb:48", &c) == VRAM_ERR_INVALID_ARG, "chunk not a power of two");
    CHECK(strstr(vram_last_error(), "chunk_size_mb") != NULL, "names the key: %s", vram_last_error());
    CHECK(vram_alloc_config_parse("chunk_size_mb:1", &c) == VRAM_ERR_INVALID_ARG, "chunk below a page");
    CHECK(vram_alloc_config_parse("reserve_slack:1", &c) == VRAM_ERR_INVALID_ARG, "slack = 1");
    CHECK(vram_alloc_config_parse("reserve_slack:-0.1", &c) == VRAM_ERR_INVALID_ARG, "negative slack");
    CHECK(strstr(vram_last_error(), "reserve_slack") != NULL, "names the key: %s", vram_last_error());
    CHECK(vram_alloc_config_parse("move_busy_pages:sometimes", &c) == VRAM_ERR_INVALID_ARG, "bad auto bool");
    CHECK(strstr(vram_last_error(), "(or auto)") != NULL, "says auto is accepted: %s", vram_last_error());
    CHECK(vram_alloc_config_parse("caching:auto", &c) == VRAM_ERR_INVALID_ARG, "auto only where a key takes it");
    CHECK(vram_alloc_config_parse("memory_fraction:auto", &c) == VRAM_ERR_INVALID_ARG, "no auto fraction");
    CHECK(vram_alloc_config_parse("move_min_mb:x", &c) == VRAM_ERR_INVALID_ARG, "bad move minimum");
    CHECK(vram_alloc_config_parse("chunk_headroom:-1", &c) == VRAM_ERR_INVALID_ARG, "negative headroom share");
    CHECK(vram_alloc_config_parse("chunk_headroom:2000000", &c) == VRAM_ERR_INVALID_ARG, "headroom share too large");
    CHECK(strstr(vram_last_error(), "chunk_headroom") != NULL, "names the key: %s", vram_last_error());
    CHECK(vram_alloc_config_parse("small_classes:few", &c) == VRAM_ERR_INVALID_ARG, "bad small_classes");
    CHECK(strstr(vram_last_error(), "small_classes") != NULL, "names the key: %s", vram_last_error());
    CHECK(memcmp(&before, &c, sizeof c) == 0, "errors leave the configuration unchanged");
    vram_alloc_config_default(&c);
    CHECK(c.move_busy_pages == VRAM_CONF_AUTO && c.reserve_slack == VRAM_CONF_AUTO && c.move_min == 0, "auto defaults");
    char auto_text[512];
    vram_alloc_config_format(&c, auto_text, sizeof auto_text);
    CHECK(strstr(auto_text, "move_busy_pages:auto,reserve_slack:auto") != NULL, "auto formatted: %s", auto_text);
    vram_alloc_config e;
    vram_alloc_config_default(&e);
    CHECK_OK(vram_alloc_config_parse(auto_text, &e));
    CHECK(memcmp(&c, &e, sizeof c) == 0, "defaults round-trip: %s", auto_text);
    CHECK(c.small_classes == 1 && !strstr(auto_text, "small_classes"), "small classes on by default: %s", auto_text);
    CHECK(c.chunk_headroom == 64 && !strstr(auto_text, "chunk_headroom"), "chunk_headroom 64 by default: %s", auto_text);
    CHECK_OK(vram_alloc_config_parse("small_classes:False", &c));
    vram_alloc_config_format(&c, auto_text, sizeof auto_text);
    CHECK(!c.small_classes && strstr(auto_text, ",small_classes:False"), "small_classes:False formatted: %s", auto_text);
    vram_alloc_config_default(&e);
    CHECK_OK(vram_alloc_config_parse(auto_text, &e));
    CHECK(memcmp(&c, &e, sizeof c) == 0, "small_classes:False round-trips: %s", auto_text);
    CHECK_OK(vram_alloc_config_parse("move_busy_pages:True,reserve_slack:0.05,move_min_mb:128", &c));
    CHECK(c.move_busy_pages == 1 && c.reserve_slack == 0.05 && c.move_min == 128 * MiB, "policies parsed");
    CHECK_OK(vram_alloc_config_parse("move_busy_pages:auto,reserve_slack:auto", &c));
    CHECK(c.move_busy_pages == VRAM_CONF_AUTO && c.reserve_slack == VRAM_CONF_AUTO, "auto parsed");
    c = before;
    CHECK_OK(vram_alloc_config_parse("max_reserved:12GiB,roundup_power2_divisions:4,chunk_size_mb:16,reserve_slack:0.02,move_min_mb:32,chunk_headroom:0", &c));
    CHECK(c.chunk_headroom == 0, "chunk_headroom parsed");
    CHECK(c.chunk_size == 16 * MiB && c.reserve_slack == 0.02, "chunk and slack parsed");
    CHECK(c.max_reserved == 12 * GiB, "size with unit");
    char text[512];
    vram_alloc_config_format(&c, text, sizeof text);
    vram_alloc_config d;
    vram_alloc_config_default(&d);
    CHECK_OK(vram_alloc_config_parse(text, &d));
    CHECK(memcmp(&c, &d, sizeof c) == 0, "format round-trips: %s", text);
    /* every option at its longest value: the string fits VRAM_ALLOC_CONF_FORMAT_MAX and the
     * fractions keep all their digits (six significant digits, as %g writes, lost them) */
    vram_alloc_config_default(&c);
    CHECK_OK(vram_alloc_config_parse("expandable_segments:False,page_size_mb:1024,chunk_size_mb:65536,"
                                     "max_split_size_mb:17592186044415,max_non_split_rounding_mb:17592186044415,"
                                     "roundup_power2_divisions:2147483648,memory_fraction:0.12345678901234568,"
                                     "max_reserved:18446744073709551615,history:16777216,caching:False,"
                                     "move_busy_pages:False,reserve_slack:1.2345678901234567e-300,"
                                     "move_min_mb:17592186044415,chunk_headroom:1048575,"
                                     "garbage_collection_threshold:0.98765432109876543,small_classes:False", &c));
    char longest[VRAM_ALLOC_CONF_FORMAT_MAX + 64];
    vram_alloc_config_format(&c, longest, sizeof longest);
    CHECK(strlen(longest) < VRAM_ALLOC_CONF_FORMAT_MAX, "longest configuration fits: %zu bytes", strlen(longest));
    vram_alloc_config_default(&d);
    CHECK_OK(vram_alloc_config_parse(longest, &d));
    CHECK(memcmp(&c, &d, sizeof c) == 0, "longest configuration round-trips: %s", longest);
    CHECK(strstr(longest, "memory_fraction:0.12345678901234568,") != NULL, "all digits kept: %s", longest);
    setenv("VRAM_ALLOC_CONF", "nonsense_key:1", 1);
    vram_device *dev;
    CHECK_OK(vram_device_open("sim", &dev));
    vram_allocator *a = NULL;
    CHECK(vram_allocator_new(dev, NULL, &a) == VRAM_ERR_INVALID_ARG && a == NULL, "bad environment is an error");
    unsetenv("VRAM_ALLOC_CONF");
    vram_device_close(dev);

    uint64_t v;
    CHECK_OK(vram_parse_size("80GiB", &v));
    CHECK(v == 80 * GiB, "80GiB");
    CHECK_OK(vram_parse_size("1.5 MB", &v));
    CHECK(v == 1500000, "1.5 MB");
    CHECK(vram_parse_size("-5", &v) == VRAM_ERR_PARSE, "negative size");
    CHECK(vram_parse_size("12 parsecs", &v) == VRAM_ERR_PARSE, "unknown unit");
    CHECK(vram_parse_size("", &v) == VRAM_ERR_PARSE, "empty");
    CHECK(vram_parse_size("99999999999999999999TiB", &v) == VRAM_ERR_PARSE, "overflow");
    /* integers exactly (they went through a double: 2^63 - 1 became 2^63) */
    CHECK(vram_parse_size("9223372036854775807", &v) == VRAM_OK && v == 9223372036854775807ull, "2^63 - 1 exactly");
    CHECK(vram_parse_size("18446744073709551615", &v) == VRAM_OK && v == UINT64_MAX, "the largest size");
    CHECK(vram_parse_size("18446744073709551616", &v) == VRAM_ERR_PARSE, "one above the largest");
    CHECK(vram_parse_size("17179869184GiB", &v) == VRAM_ERR_PARSE, "2^64 bytes through the unit");
    CHECK(vram_parse_size("16777215TiB", &v) == VRAM_OK && v == 16777215ull << 40, "16777215TiB exactly");
    CHECK(vram_parse_size("2.5GiB", &v) == VRAM_OK && v == 5 * GiB / 2, "decimals still work");
    /* hexadecimal (which strtod reads) is refused, and an infinite number is too large */
    CHECK(vram_parse_size("0x100", &v) == VRAM_ERR_PARSE && strstr(vram_last_error(), "write it in decimal"),
          "hexadecimal refused: %s", vram_last_error());
    CHECK(vram_parse_size("1e309GiB", &v) == VRAM_ERR_PARSE && strstr(vram_last_error(), "too large"),
          "1e309: too large: %s", vram_last_error());
    CHECK(vram_parse_size("1e3KiB", &v) == VRAM_OK && v == 1000 * 1024, "an exponent is a number");
    CHECK(vram_device_open("tpu:0", &dev) == VRAM_ERR_INVALID_ARG, "unknown device");
    CHECK(vram_device_open("sim:lots", &dev) == VRAM_ERR_PARSE, "bad sim capacity");
    /* a message that wraps the one before it keeps that one whole (it was formatted over itself) */
    CHECK(strcmp(vram_last_error(), "sim device: bad size 'lots': expected a number such as 512, 64KiB or 80GiB") == 0,
          "the bad capacity named once: %s", vram_last_error());
    CHECK(vram_device_open("host:lots", &dev) == VRAM_ERR_PARSE && strstr(vram_last_error(), "host device: bad size 'lots'"),
          "host: %s", vram_last_error());
    vram_alloc_config cfg;
    vram_alloc_config_default(&cfg);
    CHECK(vram_alloc_config_parse("max_reserved:lots", &cfg) != VRAM_OK &&
              strstr(vram_last_error(), "VRAM_ALLOC_CONF: max_reserved: bad size 'lots'"),
          "max_reserved: %s", vram_last_error());
}

/* move_busy_pages and reserve_slack default to "auto": chosen by what the device can do. */
static void test_auto_policies(void) {
    vram_device *dev;
    vram_allocator *a = open_alloc("sim:1GiB", "", &dev);
    const vram_alloc_config *c = vram_allocator_config(a);
    CHECK(c->move_busy_pages == 0 && c->reserve_slack == 0, "sim: no aliasing, pages as chunks: no slack");
    close_alloc(a, dev);
    a = open_alloc("sim:1GiB", "chunk_size_mb:64", &dev);
    CHECK(vram_allocator_config(a)->reserve_slack == 0.03, "chunks above a page: 3%% slack");
    close_alloc(a, dev);
    /* cudasim: the sim device with CUDA's events, aliasing and 64 MiB chunks */
    a = open_alloc("cudasim:4GiB", "", &dev);
    c = vram_allocator_config(a);
    CHECK(c->move_busy_pages == 1 && c->reserve_slack == 0.03, "cudasim: aliasing and 3%% slack as on CUDA");
    void *x;
    CHECK_OK(vram_allocator_malloc(a, 128 * MiB, 0, 0, &x));
    vram_stats st;
    vram_allocator_get_stats(a, &st);
    CHECK(st.num_device_alloc == 2, "cudasim: 128 MiB in two 64 MiB chunks, got %llu",
          (unsigned long long)st.num_device_alloc);
    CHECK_OK(vram_allocator_record_stream(a, x, 7));
    CHECK_OK(vram_allocator_free(a, x)); /* an event on stream 7, complete when asked */
    CHECK_OK(vram_allocator_empty_cache(a));
    vram_allocator_get_stats(a, &st);
    CHECK(st.reserved_bytes[0].current == 0, "cudasim: everything returned, got %lld",
          (long long)st.reserved_bytes[0].current);
    close_alloc(a, dev);
    CHECK(vram_device_open("cudasim:lots", &dev) == VRAM_ERR_PARSE && strstr(vram_last_error(), "cudasim device"),
          "a bad cudasim capacity names the device: %s", vram_last_error());
    CHECK_OK(event_device_open("1GiB", &dev));
    vram_alloc_config cfg;
    vram_alloc_config_default(&cfg);
    CHECK_OK(vram_allocator_new(dev, &cfg, &a));
    CHECK(vram_allocator_config(a)->move_busy_pages == 1, "a device that aliases pages moves busy ones");
    vram_allocator_destroy(a);
    CHECK_OK(vram_alloc_config_parse("move_busy_pages:False,reserve_slack:0.1", &cfg));
    CHECK_OK(vram_allocator_new(dev, &cfg, &a));
    c = vram_allocator_config(a);
    CHECK(c->move_busy_pages == 0 && c->reserve_slack == 0.1, "explicit values stay");
    vram_allocator_destroy(a);
    vram_device_close(dev);
}

/* Caching turned off and on at run time (PyTorch's caching_allocator_enable): off empties the
 * cache and makes every free return its memory; on again caches, and small blocks allocated
 * while it was off (512-byte rounding) never join the class stacks, whose blocks must be of
 * their class's size (test_alloc_random toggles it among millions of operations). */
static void test_set_caching(void) {
    vram_device *dev;
    vram_allocator *a = open_alloc("sim:1GiB", "", &dev);
    vram_stats st;
    void *p, *q, *r;
    CHECK_OK(vram_allocator_malloc(a, 3 * MiB, 0, 0, &p));
    CHECK_OK(vram_allocator_malloc(a, 100000, 0, 0, &q));
    CHECK_OK(vram_allocator_free(a, p));
    vram_allocator_get_stats(a, &st);
    CHECK(st.reserved_bytes[0].current > st.allocated_bytes[0].current, "cached while caching is on");
    CHECK_OK(vram_allocator_set_caching(a, 0));
    vram_allocator_get_stats(a, &st);
    CHECK(vram_allocator_config(a)->caching == 0 && st.reserved_bytes[0].current == 2 * MiB,
          "caching off: the cache is returned at once (the small block's page stays): %lld reserved",
          (long long)st.reserved_bytes[0].current);
    void *left, *right; /* r between two live blocks, so that its free is deferred, not merged */
    CHECK_OK(vram_allocator_malloc(a, 100000, 0, 0, &left));
    CHECK_OK(vram_allocator_malloc(a, 100000, 0, 0, &r)); /* 512-byte rounding while off */
    CHECK_OK(vram_allocator_malloc(a, 100000, 0, 0, &right));
    CHECK(block_size(a, 100000) == 100352, "no size classes while caching is off");
    CHECK_OK(vram_allocator_free(a, q));
    CHECK_OK(vram_allocator_malloc(a, 5 * MiB, 0, 0, &p));
    CHECK_OK(vram_allocator_free(a, p));
    vram_allocator_get_stats(a, &st);
    CHECK(st.reserved_bytes[0].current == 2 * MiB, "a free returns its memory while caching is off: %lld reserved",
          (long long)st.reserved_bytes[0].current);
    CHECK_OK(vram_allocator_set_caching(a, 0)); /* no change */
    CHECK_OK(vram_allocator_set_caching(a, 1));
    CHECK_OK(vram_allocator_free(a, r)); /* 100352 bytes, not a class size: coalesced, not held */
    void *split;
    CHECK_OK(vram_allocator_malloc(a, 20000, 0, 0, &split)); /* a split: r leaves its slot */
    CHECK_OK(vram_allocator_check(a));
    CHECK_OK(vram_allocator_malloc(a, 100353, 0, 0, &q)); /* class 112 KiB, r's class had it been held */
    size_t size = 0;
    CHECK_OK(vram_allocator_block_info(a, q, &size, NULL, NULL));
    CHECK(size == 112 * KiB, "caching on again: classes again, and the odd-sized block was not handed out as one: %zu", size);
    CHECK_OK(vram_allocator_free(a, q));
    CHECK_OK(vram_allocator_free(a, split));
    CHECK_OK(vram_allocator_free(a, left));
    CHECK_OK(vram_allocator_free(a, right));
    CHECK_OK(vram_allocator_malloc(a, 3 * MiB, 0, 0, &p));
    CHECK_OK(vram_allocator_free(a, p));
    vram_allocator_get_stats(a, &st);
    CHECK(st.reserved_bytes[0].current > st.allocated_bytes[0].current, "caching on again: frees are cached");
    CHECK(vram_allocator_set_caching(NULL, 0) == VRAM_ERR_INVALID_ARG, "a null allocator refused");
    close_alloc(a, dev);
}

/* vram_allocator_set_config: the options PyTorch's settings reach, changed on a running allocator
 * (segments model, where max_split_size applies; a device without events, whose frees are ready
 * for garbage collection at once), each seen in what the next requests get; the
 * options fixed at creation and values out of range refused, nothing changed; the free path
 * not changed during a capture. */
static void test_set_config(void) {
    vram_device *dev;
    vram_allocator *a = open_alloc("sim:1GiB", "expandable_segments:False", &dev);
    CHECK(a != NULL, "allocator");
    if (!a) return;
    vram_alloc_config want, got;
    vram_stats st;
    void *big, *p;
    CHECK_OK(vram_allocator_malloc(a, 30 * MiB, 0, 0, &big)); /* its own 30 MiB segment */
    vram_allocator_get_stats(a, &st);
    CHECK(st.oversize_allocations.current == 0 && st.max_split_size == -1, "no split limit at the start");
    vram_allocator_get_config(a, &want);
    want.max_split_size = 20 * MiB;
    want.roundup_power2_divisions = 4;
    want.memory_fraction = 0.5;
    want.history_entries = 64;
    CHECK_OK(vram_allocator_set_config(a, &want));
    vram_allocator_get_stats(a, &st);
    CHECK(st.max_split_size == (int64_t)(20 * MiB) && st.oversize_allocations.current == 1 &&
              st.oversize_segments.current == 1 && st.oversize_allocations.peak == 1,
          "max_split_size 20 MiB: the live 30 MiB block and its segment count as oversize (%lld, %lld)",
          (long long)st.oversize_allocations.current, (long long)st.oversize_segments.current);
    CHECK(block_size(a, 5 * MiB + 1) == 6 * MiB, "roundup_power2_divisions:4 rounds 5 MiB + 1 to 6 MiB");
    CHECK(block_size(a, 100000) == 112 * KiB, "a class size while small classes are on");
    vram_allocator_get_config(a, &want);
    want.roundup_power2_divisions = 0;
    want.small_classes = 0;
    CHECK_OK(vram_allocator_set_config(a, &want));
    CHECK(block_size(a, 100000) == 100352, "small_classes off: 512-byte rounding");
    CHECK(block_size(a, 5 * MiB + 1) == 5 * MiB + 512, "roundup_power2_divisions off again");
    CHECK(vram_allocator_limit(a) == 512 * MiB, "memory_fraction 0.5 of 1 GiB: %llu",
          (unsigned long long)vram_allocator_limit(a));
    CHECK(vram_allocator_history_count(a) >= 4, "the history records from the change on");
    CHECK_OK(vram_allocator_free(a, big));
    vram_allocator_get_stats(a, &st);
    CHECK(st.oversize_allocations.current == 0, "the oversize block freed");
    CHECK_OK(vram_allocator_malloc(a, 5 * MiB, 0, 0, &p));
    CHECK(p != big, "a 5 MiB request does not split the cached 30 MiB segment, oversize now");
    CHECK_OK(vram_allocator_free(a, p));
    CHECK_OK(vram_allocator_check(a));

    /* the pages model's policies: taken as given, `auto` resolved as at creation */
    vram_allocator_get_config(a, &want);
    want.reserve_slack = VRAM_CONF_AUTO;
    want.move_busy_pages = VRAM_CONF_AUTO;
    want.move_min = 8 * MiB;
    want.chunk_headroom = 0;
    CHECK_OK(vram_allocator_set_config(a, &want));
    vram_allocator_get_config(a, &got);
    CHECK(got.reserve_slack == 0.0 && (got.move_busy_pages == 0 || got.move_busy_pages == 1) && got.move_min == 8 * MiB &&
              got.chunk_headroom == 0,
          "policies set, auto resolved (slack %g, move_busy_pages %d)", got.reserve_slack, got.move_busy_pages);

    /* refused: an option fixed at creation, values out of range; nothing changes */
    vram_allocator_get_config(a, &want);
    want.expandable_segments = 1;
    want.memory_fraction = 0.25;
    CHECK(vram_allocator_set_config(a, &want) == VRAM_ERR_INVALID_ARG && strstr(vram_last_error(), "expandable_segments"),
          "expandable_segments cannot turn pages on for an allocator started in the segments model: %s", vram_last_error());
    /* the ranges VRAM_ALLOC_CONF's keys take (vram_alloc_config_check), each named in the error */
    static const struct {
        double fraction, gc, slack;
        uint32_t history, divisions, headroom;
        const char *named;
    } bad[] = {{0.0, 0.0, 0.0, 0, 0, 64, "memory_fraction"},
               {1.5, 0.0, 0.0, 0, 0, 64, "memory_fraction"},
               {0.5, 1.0, 0.0, 0, 0, 64, "garbage_collection_threshold"},
               {0.5, -0.1, 0.0, 0, 0, 64, "garbage_collection_threshold"},
               {0.5, 0.0, 1.0, 0, 0, 64, "reserve_slack"},
               {0.5, 0.0, -0.5, 0, 0, 64, "reserve_slack"},
               {0.5, 0.0, 0.0, VRAM_HISTORY_MAX + 1, 0, 64, "history"},
               {0.5, 0.0, 0.0, 0, 3, 64, "roundup_power2_divisions"},
               {0.5, 0.0, 0.0, 0, 0, (1u << 20) + 1, "chunk_headroom"}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        vram_allocator_get_config(a, &want);
        want.memory_fraction = bad[i].fraction;
        want.garbage_collection_threshold = bad[i].gc;
        want.reserve_slack = bad[i].slack;
        want.history_entries = bad[i].history;
        want.roundup_power2_divisions = bad[i].divisions;
        want.chunk_headroom = bad[i].headroom;
        CHECK(vram_allocator_set_config(a, &want) == VRAM_ERR_INVALID_ARG && strstr(vram_last_error(), bad[i].named),
              "bad value %zu refused, naming %s: %s", i, bad[i].named, vram_last_error());
        /* the same configuration is refused at creation too */
        vram_allocator *other = NULL;
        CHECK(vram_allocator_new(dev, &want, &other) == VRAM_ERR_INVALID_ARG && !other &&
                  strstr(vram_last_error(), bad[i].named),
              "allocator_new refuses bad value %zu: %s", i, vram_last_error());
    }
    vram_allocator_get_config(a, &got);
    CHECK(got.memory_fraction == 0.5 && got.expandable_segments == 0 && got.history_entries == 64 &&
              vram_allocator_limit(a) == 512 * MiB,
          "nothing changed by the refused calls");
    CHECK(vram_allocator_set_config(NULL, &want) == VRAM_ERR_INVALID_ARG &&
              vram_allocator_set_config(a, NULL) == VRAM_ERR_INVALID_ARG,
          "null arguments refused");

    /* garbage collection on at run time: frees are coalesced at once and the cache is trimmed */
    vram_allocator_get_config(a, &want);
    want.garbage_collection_threshold = 0.5;
    want.memory_fraction = 1.0;
    want.max_split_size = UINT64_MAX;
    CHECK_OK(vram_allocator_set_config(a, &want));
    vram_allocator_get_stats(a, &st);
    CHECK(st.oversize_allocations.current == 0 && st.oversize_segments.current == 0 && st.max_split_size == -1,
          "no split limit again");
    void *blocks[24];
    for (int i = 0; i < 24; i++) CHECK_OK(vram_allocator_malloc(a, 30 * MiB, 0, 0, &blocks[i])); /* 720 MiB */
    for (int i = 0; i < 24; i++) CHECK_OK(vram_allocator_free(a, blocks[i]));
    vram_allocator_get_stats(a, &st);
    CHECK(st.reserved_bytes[0].current <= (int64_t)(512 * MiB),
          "garbage_collection_threshold 0.5: the cache trimmed to half the device once reserved memory passed it "
          "(%lld MiB reserved)", (long long)(st.reserved_bytes[0].current / (long long)MiB));
    CHECK_OK(vram_allocator_check(a));

    close_alloc(a, dev);

    /* during a capture the free path stays; other options may change */
    a = open_alloc("events:1GiB", "garbage_collection_threshold:0.5", &dev);
    CHECK(a != NULL, "allocator with events");
    if (!a) return;
    CHECK_OK(vram_allocator_begin_pool(a, 3));
    event_device_state(dev)->capturing = 1;
    vram_allocator_get_config(a, &want);
    want.garbage_collection_threshold = 0.0;
    CHECK(vram_allocator_set_config(a, &want) == VRAM_ERR_STATE, "garbage collection not switched during a capture");
    CHECK(vram_allocator_set_caching(a, 0) == VRAM_ERR_STATE, "nor caching");
    want.garbage_collection_threshold = 0.5;
    want.roundup_power2_divisions = 2;
    CHECK_OK(vram_allocator_set_config(a, &want));
    event_device_state(dev)->capturing = 0;
    CHECK_OK(vram_allocator_end_pool(a, 3));
    CHECK_OK(vram_allocator_release_pool(a, 3));
    vram_allocator_get_config(a, &got);
    CHECK(got.garbage_collection_threshold == 0.5 && got.roundup_power2_divisions == 2, "roundup changed in the capture");
    CHECK_OK(vram_allocator_check(a));
    close_alloc(a, dev);
}

/* The segment (is_expandable as asked) that holds ptr in a snapshot, or -1 when none does. */
static int segment_kind(vram_allocator *a, const void *ptr) {
    vram_snapshot *snap = NULL;
    if (vram_allocator_snapshot(a, &snap) != VRAM_OK) return -1;
    int kind = -1;
    uint64_t p = (uint64_t)(uintptr_t)ptr;
    for (size_t i = 0; i < snap->num_segments; i++)
        if (p >= snap->segments[i].address && p < snap->segments[i].address + snap->segments[i].total_size)
            kind = snap->segments[i].is_expandable;
    vram_snapshot_free(snap);
    return kind;
}

/* expandable_segments switched at run time (PyTorch's _set_allocator_settings applies it to new
 * segments): a pages-model allocator turned off makes new segments for what its mapped pages
 * cannot hold, keeps serving from both, releases both, and grows by pages again once turned on;
 * one started in the segments model cannot turn pages on. */
static void test_expandable_switch(void) {
    vram_device *dev;
    vram_allocator *a = open_alloc("sim:1GiB", "", &dev);
    CHECK(a != NULL, "allocator");
    if (!a) return;
    vram_alloc_config want;
    void *p1, *p2, *p3, *p4;
    CHECK_OK(vram_allocator_malloc(a, 30 * MiB, 0, 0, &p1));
    CHECK(segment_kind(a, p1) == 1, "pages at the start");
    vram_allocator_get_config(a, &want);
    want.expandable_segments = 0;
    CHECK_OK(vram_allocator_set_config(a, &want));
    CHECK_OK(vram_allocator_malloc(a, 40 * MiB, 0, 0, &p2));
    CHECK(segment_kind(a, p2) == 0, "turned off: a new segment for memory the pages do not have mapped");
    CHECK_OK(vram_allocator_check(a));
    CHECK_OK(vram_allocator_free(a, p1));
    CHECK_OK(vram_allocator_malloc(a, 20 * MiB, 0, 0, &p3));
    CHECK(p3 == p1, "mapped pages still serve requests that fit them");
    CHECK_OK(vram_allocator_malloc(a, 100 * 1024, 0, 0, &p4)); /* small pool: pages or a segment, both fine */
    CHECK_OK(vram_allocator_check(a));
    CHECK_OK(vram_allocator_free(a, p2));
    CHECK_OK(vram_allocator_free(a, p3));
    CHECK_OK(vram_allocator_free(a, p4));
    CHECK_OK(vram_allocator_empty_cache(a));
    vram_stats st;
    vram_allocator_get_stats(a, &st);
    CHECK(st.reserved_bytes[0].current == 0, "empty_cache returns both the pages and the segments (%lld left)",
          (long long)st.reserved_bytes[0].current);
    want.expandable_segments = 1;
    CHECK_OK(vram_allocator_set_config(a, &want));
    CHECK_OK(vram_allocator_malloc(a, 40 * MiB, 0, 0, &p2));
    CHECK(segment_kind(a, p2) == 1, "turned on again: pages");
    CHECK_OK(vram_allocator_free(a, p2));
    CHECK_OK(vram_allocator_check(a));
    close_alloc(a, dev);

    a = open_alloc("sim:1GiB", "expandable_segments:False", &dev);
    CHECK(a != NULL, "allocator in the segments model");
    if (!a) return;
    vram_allocator_get_config(a, &want);
    want.expandable_segments = 1;
    CHECK(vram_allocator_set_config(a, &want) == VRAM_ERR_INVALID_ARG && strstr(vram_last_error(), "segments model"),
          "started in the segments model: pages cannot be turned on (%s)", vram_last_error());
    close_alloc(a, dev);
}

int main(void) {
    test_auto_policies();
    test_config();
    test_set_caching();
    test_set_config();
    test_expandable_switch();
    return check_done();
}
