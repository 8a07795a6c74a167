/* test_snapshot_json.c — the JSON string writer every JSON of vram uses (vram_json_write_string:
 * UTF-8 kept, every malformed sequence replaced); the snapshot written as JSON: valid (strict
 * validator), PyTorch's key names, segments sorted by address, strings escaped (quotes, control characters, bad UTF-8),
 * "device_free" in place of "addr" for OOM events, an event's context where it has one; then the
 * snapshot of a live allocator, and each thread's context (vram_set_context) on its own events.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "json_check.h"
#include "vram/alloc.h"
#include "vram/snapshot.h"

static char *to_json(const vram_snapshot *s, vram_status *st) {
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    *st = vram_snapshot_write_json(s, f);
    fclose(f);
    return text;
}

static void test_names(void) {
    CHECK(!strcmp(vram_event_action_name(VRAM_EVENT_ALLOC), "alloc"), "alloc");
    CHECK(!strcmp(vram_event_action_name(VRAM_EVENT_FREE_REQUESTED), "free_requested"), "free_requested");
    CHECK(!strcmp(vram_event_action_name(VRAM_EVENT_FREE_COMPLETED), "free_completed"), "free_completed");
    CHECK(!strcmp(vram_event_action_name(VRAM_EVENT_SEGMENT_ALLOC), "segment_alloc"), "segment_alloc");
    CHECK(!strcmp(vram_event_action_name(VRAM_EVENT_SEGMENT_FREE), "segment_free"), "segment_free");
    CHECK(!strcmp(vram_event_action_name(VRAM_EVENT_SEGMENT_MAP), "segment_map"), "segment_map");
    CHECK(!strcmp(vram_event_action_name(VRAM_EVENT_SEGMENT_UNMAP), "segment_unmap"), "segment_unmap");
    CHECK(!strcmp(vram_event_action_name(VRAM_EVENT_OOM), "oom"), "oom");
    CHECK(!strcmp(vram_event_action_name(VRAM_EVENT_EMPTY_CACHE), "empty_cache"), "empty_cache");
    CHECK(!strcmp(vram_event_action_name((vram_event_action)99), "unknown"), "out of range action");
    CHECK(!strcmp(vram_block_state_name(VRAM_BLOCK_ACTIVE_ALLOCATED), "active_allocated"), "active_allocated");
    CHECK(!strcmp(vram_block_state_name(VRAM_BLOCK_ACTIVE_PENDING_FREE), "active_pending_free"), "pending");
    CHECK(!strcmp(vram_block_state_name(VRAM_BLOCK_INACTIVE), "inactive"), "inactive");
    CHECK(!strcmp(vram_block_state_name((vram_block_state)7), "unknown"), "out of range state");
}

static void test_hand_built(void) {
    vram_snapshot s;
    memset(&s, 0, sizeof s);
    vram_snapshot_segment segs[2] = {
        {.address = 0x7000000, .total_size = 2 << 20, .allocated_size = 1024, .active_size = 1024,
         .requested_size = 1000, .stream = 0, .pool = VRAM_POOL_LARGE, .is_expandable = 1, .first_block = 1,
         .num_blocks = 1},
        {.address = 0x1000, .total_size = 4096, .allocated_size = 512, .active_size = 1024, .requested_size = 700,
         .stream = 5, .pool = VRAM_POOL_SMALL, .is_expandable = 0, .first_block = 0, .num_blocks = 1},
    };
    vram_snapshot_block blocks[2] = {
        {.address = 0x1000, .size = 4096, .requested_size = 700, .state = VRAM_BLOCK_ACTIVE_PENDING_FREE, .tag = 6},
        {.address = 0x7000000, .size = 1024, .requested_size = 1000, .state = VRAM_BLOCK_ACTIVE_ALLOCATED, .tag = 1,
         .graph_pool = 3},
    };
    vram_event events[3] = {
        {.action = VRAM_EVENT_ALLOC, .addr = 0x7000000, .size = 1000, .stream = 0, .tag = 1, .context = 4000000000u,
         .time_us = 1700000000000000},
        {.action = VRAM_EVENT_OOM, .addr = 12345, .size = 1ull << 40, .stream = 2, .tag = 31, .time_us = 1700000000000001},
        {.action = VRAM_EVENT_SEGMENT_MAP, .addr = 0x7000000, .size = 2 << 20, .time_us = 1700000000000002},
    };
    s.segments = segs;
    s.num_segments = 2;
    s.blocks = blocks;
    s.num_blocks = 2;
    s.events = events;
    s.num_events = 3;
    s.device_index = 2;
    snprintf(s.settings, sizeof s.settings, "expandable_segments:True,odd:\"q\\\"");
    const char *builtin[] = {"other", "parameter", "gradient", "optimizer_state", "activation", "temporary"};
    for (int i = 0; i < 6; i++) snprintf(s.tag_names[i], sizeof s.tag_names[i], "%s", builtin[i]);
    snprintf(s.tag_names[6], sizeof s.tag_names[6], "we\"ird\n\x01tag\xff\xc3\xa9");

    vram_status st;
    char *text = to_json(&s, &st);
    CHECK_OK(st);
    if (!text) return;
    CHECK(json_valid(text, strlen(text)), "valid JSON:\n%s", text);
    const char *low = strstr(text, "\"address\": 4096");
    const char *high = strstr(text, "\"address\": 117440512");
    CHECK(low && high && low < high, "segments sorted by address");
    static const char *keys[] = {"\"segments\": [", "\"device\": 2", "\"total_size\": 2097152", "\"allocated_size\": 1024",
                                 "\"active_size\": 1024", "\"requested_size\": 700", "\"stream\": 5",
                                 "\"segment_type\": \"small\"", "\"segment_type\": \"large\"", "\"segment_pool_id\": [0, 0]",
                                 "\"is_expandable\": true", "\"is_expandable\": false", "\"frames\": []", "\"blocks\": [",
                                 "\"state\": \"active_pending_free\"", "\"state\": \"active_allocated\"",
                                 "\"device_traces\": [[", "\"action\": \"alloc\"", "\"action\": \"oom\"",
                                 "\"device_free\": 12345", "\"size\": 1099511627776", "\"action\": \"segment_map\"",
                                 "\"time_us\": 1700000000000002", "\"tag\": \"parameter\"", "\"tag\": \"tag 31\"",
                                 "\"allocator_settings\": {\"VRAM_ALLOC_CONF\": \"expandable_segments:True,odd:\\\"q\\\\\\\"\"}",
                                 "\"tag\": \"we\\\"ird\\n\\u0001tag\\ufffd\xc3\xa9\"",
                                 ("\"tag_names\": [\"other\", \"parameter\", \"gradient\", \"optimizer_state\", "
                                  "\"activation\", \"temporary\", \"we")};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) CHECK(strstr(text, keys[i]) != NULL, "has %s", keys[i]);
    CHECK(strstr(text, "\"addr\": 12345") == NULL, "oom event has device_free, not addr");
    const char *ctx = strstr(text, ", \"context\": 4000000000}");
    CHECK(ctx && !strstr(ctx + 12, "context"), "an event's context written where it is not 0, once");
    const char *pool = strstr(text, ", \"graph_pool\": 3}");
    CHECK(pool && pool > high && !strstr(pool + 14, "graph_pool") && !strstr(text, "\"graph_pool\": 0"),
          "graph_pool written once, on the block of a private pool only");
    free(text);

    /* An empty snapshot is valid too. */
    vram_snapshot empty;
    memset(&empty, 0, sizeof empty);
    text = to_json(&empty, &st);
    CHECK_OK(st);
    CHECK(text && json_valid(text, strlen(text)), "empty snapshot is valid JSON: %s", text ? text : "(none)");
    CHECK(text && strstr(text, "\"segments\": []") && strstr(text, "\"device_traces\": [[]]"), "empty lists: %s", text ? text : "(none)");
    free(text);

    /* Inconsistent block ranges are an error, not a read out of bounds. */
    segs[0].num_blocks = 5;
    text = to_json(&s, &st);
    CHECK(st == VRAM_ERR_INVALID_ARG, "bad block range: %s", vram_status_str(st));
    free(text);
    CHECK(vram_snapshot_write_json(NULL, stdout) == VRAM_ERR_INVALID_ARG, "null snapshot");

    /* The validator itself rejects what it must. */
    CHECK(!json_valid("{\"a\": 1,}", 9), "trailing comma rejected");
    CHECK(!json_valid("{\"a\": \"\x01\"}", 10), "raw control character rejected");
    CHECK(!json_valid("[1 2]", 5), "missing comma rejected");
    CHECK(json_valid("[1, -2.5e3, true, null, {\"x\": []}]", 34), "valid value accepted");
}

/* An allocator on the sim device with a history of 64 events. */
static vram_allocator *with_history(vram_device **dev) {
    vram_allocator *a = NULL;
    vram_alloc_config cfg;
    vram_alloc_config_default(&cfg);
    cfg.history_entries = 64;
    CHECK_OK(vram_device_open("sim", dev));
    CHECK_OK(vram_allocator_new(*dev, &cfg, &a));
    return a;
}

/* A live allocator with history on: its snapshot as JSON. */
static void test_allocator(void) {
    vram_device *dev;
    vram_allocator *a = with_history(&dev);
    void *p[8];
    for (int i = 0; i < 8; i++) CHECK_OK(vram_allocator_malloc(a, (size_t)(i + 1) << 18, 0, VRAM_TAG_ACTIVATION, &p[i]));
    for (int i = 0; i < 8; i += 2) CHECK_OK(vram_allocator_free(a, p[i]));
    vram_snapshot *s = NULL;
    CHECK_OK(vram_allocator_snapshot(a, &s));
    if (s) {
        size_t live = 0;
        for (size_t i = 0; i < s->num_blocks; i++) live += s->blocks[i].state == VRAM_BLOCK_ACTIVE_ALLOCATED;
        CHECK(live == 4, "4 live blocks in the snapshot, got %zu", live);
        vram_status st;
        char *text = to_json(s, &st);
        CHECK_OK(st);
        CHECK(text && json_valid(text, strlen(text)), "allocator snapshot is valid JSON");
        CHECK(text && strstr(text, "\"action\": \"alloc\"") && strstr(text, "\"action\": \"free_requested\""),
              "history events present");
        CHECK(text && strstr(text, "\"tag\": \"activation\""), "tags named");
        free(text);
        vram_snapshot_free(s);
    }
    for (int i = 1; i < 8; i += 2) vram_allocator_free(a, p[i]);
    vram_allocator_destroy(a);
    vram_device_close(dev);
}

/* Another thread's allocations, with a context of its own set. */
static void *other_thread(void *arg) {
    vram_allocator *a = arg;
    vram_set_context(77);
    void *p = NULL;
    if (vram_allocator_malloc(a, 3 << 20, 0, VRAM_TAG_OTHER, &p) == VRAM_OK) vram_allocator_free(a, p);
    return NULL;
}

/* Each thread's context reaches the events its calls record, and only those. */
static void test_contexts(void) {
    vram_device *dev;
    vram_allocator *a = with_history(&dev);
    CHECK(vram_context() == 0, "a thread starts with no context");
    vram_set_context(5);
    void *p = NULL, *q = NULL;
    CHECK_OK(vram_allocator_malloc(a, 1 << 20, 0, VRAM_TAG_OTHER, &p));
    pthread_t t;
    CHECK(pthread_create(&t, NULL, other_thread, a) == 0, "thread");
    pthread_join(t, NULL);
    CHECK(vram_context() == 5, "another thread's context leaves this one's alone");
    vram_set_context(0);
    CHECK_OK(vram_allocator_malloc(a, 5 << 20, 0, VRAM_TAG_OTHER, &q));
    vram_snapshot *s = NULL;
    CHECK_OK(vram_allocator_snapshot(a, &s));
    if (s) {
        int by[3] = {0, 0, 0}; /* events with context 5, 77, none */
        for (size_t i = 0; i < s->num_events; i++) {
            const vram_event *e = &s->events[i];
            int k = e->context == 5 ? 0 : e->context == 77 ? 1 : e->context == 0 ? 2 : -1;
            CHECK(k >= 0, "event %zu: context %u is one that was set", i, e->context);
            if (k < 0) continue;
            by[k]++;
            if (e->action == VRAM_EVENT_ALLOC)
                CHECK(e->size == (k == 0 ? 1u << 20 : k == 1 ? 3u << 20 : 5u << 20), "alloc of %llu with context %u",
                      (unsigned long long)e->size, e->context);
        }
        CHECK(by[0] >= 1 && by[1] >= 2 && by[2] >= 1, "events of each context: %d, %d, %d", by[0], by[1], by[2]);
        vram_snapshot_free(s);
    }
    vram_allocator_free(a, p);
    vram_allocator_free(a, q);
    vram_allocator_destroy(a);
    vram_device_close(dev);
}

/* vram_json_write_string on valid and malformed UTF-8: what it writes for `in` (len bytes, up to
 * max) is `want`. */
static void json_string_case(const char *in, size_t max, const char *want) {
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    vram_json_write_string(f, in, max);
    fclose(f);
    CHECK(text && strcmp(text, want) == 0, "JSON string of %s: %s, want %s", in, text ? text : "(none)", want);
    free(text);
}

static void test_json_strings(void) {
    json_string_case("plain \"q\" \\ \t\r\n\x01\x7f", SIZE_MAX, "\"plain \\\"q\\\" \\\\ \\t\\r\\n\\u0001\\u007f\"");
    json_string_case("entra\xc3\xaenement \xe2\x82\xac \xf0\x9f\x98\x80", SIZE_MAX,
                     "\"entra\xc3\xaenement \xe2\x82\xac \xf0\x9f\x98\x80\""); /* 2, 3 and 4 bytes kept */
    json_string_case("\xf8\x80\x80", SIZE_MAX, "\"\\ufffd\\ufffd\\ufffd\""); /* no lead byte above 0xf4 */
    json_string_case("\xff", SIZE_MAX, "\"\\ufffd\"");
    json_string_case("\xc0\xaf", SIZE_MAX, "\"\\ufffd\\ufffd\"");             /* overlong '/' */
    json_string_case("\xe0\x80\xaf", SIZE_MAX, "\"\\ufffd\\ufffd\\ufffd\""); /* overlong, 3 bytes */
    json_string_case("\xed\xa0\x80", SIZE_MAX, "\"\\ufffd\\ufffd\\ufffd\""); /* a surrogate */
    json_string_case("\xf4\x90\x80\x80", SIZE_MAX, "\"\\ufffd\\ufffd\\ufffd\\ufffd\""); /* above U+10FFFF */
    json_string_case("a\xe2\x82", SIZE_MAX, "\"a\\ufffd\\ufffd\"");           /* cut short */
    json_string_case("ab\xc3\xa9", 3, "\"ab\\ufffd\"");                           /* cut by max */
}

int main(void) {
    test_json_strings();
    test_names();
    test_hand_built();
    test_allocator();
    test_contexts();
    return check_done();
}
