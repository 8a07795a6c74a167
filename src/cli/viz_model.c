/* viz_model.c — the growable arrays of a viz_model (viz_model.h) and the check that what the
 * page will draw equals the allocator's counters.
 *
 * Each append grows its arrays by doubling; the arrays of one kind (e.g. an allocation's nine
 * fields) grow together, so one count and one capacity describe them.
 */
#include "viz_model.h"

#include <stdlib.h>
#include <string.h>

/* Grows the `k` arrays in `arrs` (element sizes in `sizes`) to hold one more than *n. */
static vram_status grow(size_t *n, size_t *cap, void **arrs[], const size_t sizes[], int k) {
    if (*n < *cap) return VRAM_OK;
    size_t want = *cap ? *cap * 2 : 1024;
    for (int j = 0; j < k; j++) {
        void *p = realloc(*arrs[j], want * sizes[j]);
        if (!p) return vram_error(VRAM_ERR_HOST_MEMORY, "viz: host out of memory");
        *arrs[j] = p;
    }
    *cap = want;
    return VRAM_OK;
}

void viz_model_free(viz_model *m) {
    if (!m) return;
    free(m->name);
    free(m->note);
    free(m->ev);
    free(m->time_us);
    free(m->req);
    free(m->blk);
    free(m->addr);
    free(m->a_ev);
    free(m->f_ev);
    free(m->stack);
    free(m->stream);
    free(m->tag);
    free(m->res_ev);
    free(m->res_val);
    free(m->seg_ev);
    free(m->seg_addr);
    free(m->seg_size);
    for (size_t i = 0; i < m->n_steps; i++) free(m->step_label[i]);
    free(m->step_ev);
    free(m->step_label);
    for (int i = 0; i < m->n_tags; i++) free(m->tag_names[i]);
    for (size_t i = 0; i < m->n_stacks; i++) free(m->stacks[i]);
    free(m->stacks);
    memset(m, 0, sizeof *m);
}

vram_status viz_model_event(viz_model *m, uint32_t alloc, int is_free, double time_us) {
    /* The first event decides whether the events have times. */
    int timed = m->n_events ? m->time_us != NULL : time_us >= 0;
    void **arrs[] = {(void **)&m->ev, (void **)&m->time_us};
    size_t sizes[] = {sizeof *m->ev, sizeof *m->time_us};
    if (m->n_events >= (1u << 31)) return vram_error(VRAM_ERR_INVALID_ARG, "viz: more than 2^31 events");
    vram_status st = grow(&m->n_events, &m->cap_events, arrs, sizes, timed ? 2 : 1);
    if (st != VRAM_OK) return st;
    if (m->time_us) m->time_us[m->n_events] = time_us;
    m->ev[m->n_events++] = (alloc << 1) | (uint32_t)(is_free != 0);
    return VRAM_OK;
}

vram_status viz_model_alloc(viz_model *m, double req, double blk, double addr, int32_t a_ev, uint16_t stream,
                            uint8_t tag, int32_t stack, uint32_t *index) {
    if (m->n_allocs >= (1u << 31)) return vram_error(VRAM_ERR_INVALID_ARG, "viz: more than 2^31 allocations");
    void **arrs[] = {(void **)&m->req,  (void **)&m->blk,   (void **)&m->addr,   (void **)&m->a_ev,
                     (void **)&m->f_ev, (void **)&m->stack, (void **)&m->stream, (void **)&m->tag};
    size_t sizes[] = {8, 8, 8, 4, 4, 4, 2, 1};
    vram_status st = grow(&m->n_allocs, &m->cap_allocs, arrs, sizes, 8);
    if (st != VRAM_OK) return st;
    size_t i = m->n_allocs++;
    m->req[i] = req;
    m->blk[i] = blk;
    m->addr[i] = addr;
    m->a_ev[i] = a_ev;
    m->f_ev[i] = -1;
    m->stack[i] = stack;
    m->stream[i] = stream;
    m->tag[i] = tag;
    *index = (uint32_t)i;
    return VRAM_OK;
}

vram_status viz_model_reserved(viz_model *m, int32_t ev, double value) {
    void **arrs[] = {(void **)&m->res_ev, (void **)&m->res_val};
    size_t sizes[] = {4, 8};
    vram_status st = grow(&m->n_res, &m->cap_res, arrs, sizes, 2);
    if (st != VRAM_OK) return st;
    m->res_ev[m->n_res] = ev;
    m->res_val[m->n_res++] = value;
    return VRAM_OK;
}

vram_status viz_model_segment(viz_model *m, int32_t ev, double addr, double size) {
    void **arrs[] = {(void **)&m->seg_ev, (void **)&m->seg_addr, (void **)&m->seg_size};
    size_t sizes[] = {4, 8, 8};
    vram_status st = grow(&m->n_seg, &m->cap_seg, arrs, sizes, 3);
    if (st != VRAM_OK) return st;
    m->seg_ev[m->n_seg] = ev;
    m->seg_addr[m->n_seg] = addr;
    m->seg_size[m->n_seg++] = size;
    return VRAM_OK;
}

vram_status viz_model_step(viz_model *m, int32_t ev, const char *label) {
    void **arrs[] = {(void **)&m->step_ev, (void **)&m->step_label};
    size_t sizes[] = {4, sizeof(char *)};
    vram_status st = grow(&m->n_steps, &m->cap_steps, arrs, sizes, 2);
    if (st != VRAM_OK) return st;
    char *copy = strdup(label);
    if (!copy) return vram_error(VRAM_ERR_HOST_MEMORY, "viz: host out of memory");
    m->step_ev[m->n_steps] = ev;
    m->step_label[m->n_steps++] = copy;
    return VRAM_OK;
}

vram_status viz_model_stack(viz_model *m, const char *text, int32_t *index) {
    void **arrs[] = {(void **)&m->stacks};
    size_t sizes[] = {sizeof(char *)};
    vram_status st = grow(&m->n_stacks, &m->cap_stacks, arrs, sizes, 1);
    if (st != VRAM_OK) return st;
    if (!(m->stacks[m->n_stacks] = strdup(text))) return vram_error(VRAM_ERR_HOST_MEMORY, "viz: host out of memory");
    *index = (int32_t)m->n_stacks++;
    return VRAM_OK;
}

vram_status viz_model_tag(viz_model *m, const char *name, uint8_t *index) {
    for (int i = 0; i < m->n_tags; i++)
        if (!strcmp(m->tag_names[i], name)) {
            *index = (uint8_t)i;
            return VRAM_OK;
        }
    if (m->n_tags >= VIZ_MAX_TAGS) return vram_error(VRAM_ERR_INVALID_ARG, "more than %d tags", VIZ_MAX_TAGS);
    if (!(m->tag_names[m->n_tags] = strdup(name))) return vram_error(VRAM_ERR_HOST_MEMORY, "viz: host out of memory");
    *index = (uint8_t)m->n_tags++;
    return VRAM_OK;
}

vram_status viz_model_check(const viz_model *m) {
    double cur = m->alloc0, peak = m->alloc0;
    for (size_t i = 0; i < m->n_events; i++) {
        uint32_t a = m->ev[i] >> 1;
        if (a >= m->n_allocs) return vram_error(VRAM_ERR_INTERNAL, "viz: event %zu names allocation %u of %zu", i, a, m->n_allocs);
        if (m->ev[i] & 1) {
            if (m->f_ev[a] != (int32_t)i || m->a_ev[a] >= (int32_t)i)
                return vram_error(VRAM_ERR_INTERNAL, "viz: event %zu frees allocation %u out of order", i, a);
            cur -= m->blk[a];
        } else {
            cur += m->blk[a];
            if (cur > peak) peak = cur;
        }
    }
    if (cur != m->final_allocated)
        return vram_error(VRAM_ERR_INTERNAL, "viz: allocated memory adds up to %.0f bytes, the counter says %.0f", cur,
                          m->final_allocated);
    if (m->exact_history && peak != m->peak_allocated)
        return vram_error(VRAM_ERR_INTERNAL, "viz: peak allocated adds up to %.0f bytes, the counter says %.0f", peak,
                          m->peak_allocated);
    double res = m->reserved0, rpeak = m->reserved0;
    for (size_t k = 0; k < m->n_res; k++) {
        res = m->res_val[k];
        if (res > rpeak) rpeak = res;
    }
    if (res != m->final_reserved || (m->exact_history && rpeak != m->peak_reserved))
        return vram_error(VRAM_ERR_INTERNAL, "viz: reserved memory %.0f (peak %.0f), the counter says %.0f (peak %.0f)", res,
                          rpeak, m->final_reserved, m->peak_reserved);
    double mapped = 0;
    for (size_t k = 0; k < m->n_seg; k++) mapped += m->seg_size[k];
    if (mapped != m->final_reserved)
        return vram_error(VRAM_ERR_INTERNAL, "viz: segments add up to %.0f bytes, reserved is %.0f", mapped, m->final_reserved);
    return VRAM_OK;
}
