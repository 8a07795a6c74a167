/* autograd.c — graph nodes, the backward engine, no_grad and checkpointing.
 *
 * A node is owned by the tensor it produced (tensor->grad_fn) and by the nodes downstream of it
 * (their `next` edges); it holds the tensors it saved. The engine:
 *   1. collects the nodes reachable from the root (iterative DFS) and counts, for each, how
 *      many edges point at it (deps);
 *   2. runs nodes whose deps reached zero (a stack, so it goes depth first and frees early),
 *      handing each the gradient accumulated for its output (`pending`);
 *   3. adds each input gradient into the producer's `pending` or, for a leaf, into leaf->grad
 *      (tagged VRAM_TAG_GRADIENT; the first gradient's block is re-tagged rather than copied;
 *      under vram_grad_adopt() a producer's first gradient is shared even where another holds
 *      it, and copied on the write a second one would make while it is still shared);
 *   4. releases the node's saved tensors and edges right after it runs;
 *   5. with a gradient hook (data parallel training), counts each leaf's edges in step 1 and
 *      calls the hook when the last has run: that leaf's gradient is final.
 * Saved tensors are aliases without graph history (a node may save its own output without a
 * reference cycle). While saved, a temporary block is tagged VRAM_TAG_ACTIVATION.
 */
#include <stdlib.h>
#include <string.h>

#include "rt_internal.h"

static _Thread_local int no_grad_depth;

void vram_no_grad_enter(void) { no_grad_depth++; }
void vram_no_grad_exit(void) {
    if (no_grad_depth > 0) no_grad_depth--;
}
int vram_grad_enabled(void) { return no_grad_depth == 0; }

static int needs_grad(const vram_tensor *t) { return t && (t->requires_grad || t->grad_fn); }

vram_status vram_tensor_set_requires_grad(vram_tensor *t, int requires_grad) {
    if (!t) return vram_error(VRAM_ERR_INVALID_ARG, "set_requires_grad: null tensor");
    if (t->grad_fn) return vram_error(VRAM_ERR_STATE, "set_requires_grad: only leaf tensors (made by %s)", t->grad_fn->name);
    if (requires_grad && t->dtype != VRAM_DTYPE_F32 && t->dtype != VRAM_DTYPE_F64)
        return vram_error(VRAM_ERR_INVALID_ARG, "set_requires_grad: %s tensors cannot have gradients (f32/f64 only)",
                          vram_dtype_name(t->dtype));
    t->requires_grad = requires_grad != 0;
    return VRAM_OK;
}

int vram_tensor_requires_grad(const vram_tensor *t) { return needs_grad(t); }

void vram_runtime_set_grad_hook(vram_runtime *rt, vram_grad_hook fn, void *ctx) {
    rt->on_grad = fn;
    rt->on_grad_ctx = ctx;
}
vram_tensor *vram_tensor_grad(const vram_tensor *t) { return t->grad; }
const char *vram_tensor_grad_fn_name(const vram_tensor *t) { return t->grad_fn ? t->grad_fn->name : ""; }

vram_status vram_tensor_detach(vram_tensor *t, vram_tensor **out) {
    vram_tensor *v = vram_tensor_view_new(t, t->ndim, t->shape, t->strides, t->offset);
    if (!v) return vram_error(VRAM_ERR_HOST_MEMORY, "detach: out of host memory");
    *out = v;
    return VRAM_OK;
}

void vram_tensor_zero_grad(vram_tensor *t, int set_to_none) {
    if (!t || !t->grad) return;
    if (set_to_none) {
        vram_tensor_free(t->grad);
        t->grad = NULL;
    } else {
        vram_tensor_fill(t->grad, 0.0);
    }
}

int vram_should_record(int n, vram_tensor *const *inputs) {
    if (no_grad_depth) return 0;
    for (int i = 0; i < n; i++)
        if (needs_grad(inputs[i])) return 1;
    return 0;
}

static void node_release_graph(vram_node *n);

void vram_node_unref(vram_node *n) {
    if (!n || atomic_fetch_sub(&n->refs, 1) != 1) return;
    node_release_graph(n);
    free(n->next);
    free(n->leaf);
    free(n);
}

vram_node *vram_node_attach(vram_tensor *out, const char *name, vram_backward_fn bw, int n,
                            vram_tensor *const *inputs) {
    vram_node *node = calloc(1, sizeof *node);
    if (!node) return NULL;
    node->next = calloc((size_t)(n ? n : 1), sizeof *node->next);
    node->leaf = calloc((size_t)(n ? n : 1), sizeof *node->leaf);
    if (!node->next || !node->leaf) {
        free(node->next);
        free(node->leaf);
        free(node);
        return NULL;
    }
    atomic_init(&node->refs, 1);
    node->name = name;
    node->backward = bw;
    node->n_in = n;
    node->rt = out->rt;
    for (int i = 0; i < n; i++) {
        vram_tensor *x = inputs[i];
        if (!x) continue;
        if (x->grad_fn) {
            node->next[i] = x->grad_fn;
            atomic_fetch_add(&x->grad_fn->refs, 1);
        } else if (x->requires_grad) {
            node->leaf[i] = vram_tensor_retain(x);
        }
    }
    out->grad_fn = node;
    return node;
}

int vram_node_needs(const vram_node *n, int i) { return n->next[i] || n->leaf[i]; }

void vram_node_remember_shape(vram_node *n, int i, const vram_tensor *t) {
    n->in_ndim[i] = t->ndim;
    memcpy(n->in_shape[i], t->shape, sizeof n->in_shape[i]);
}

void vram_node_save(vram_node *n, vram_tensor *t) {
    if (n->n_saved >= 8) return; /* ops save at most a few; 8 is the bound by construction */
    vram_tensor *alias = vram_tensor_view_new(t, t->ndim, t->shape, t->strides, t->offset);
    if (!alias) { /* no host memory for the alias: a hole that backward reports (saved_missing) */
        n->saved[n->n_saved++] = NULL;
        return;
    }
    vram_storage *st = t->st;
    if (st->saved++ == 0 && st->tag == VRAM_TAG_TEMPORARY) {
        if (vram_allocator_set_tag(n->rt->alloc, st->data, VRAM_TAG_ACTIVATION) == VRAM_OK) st->tag = VRAM_TAG_ACTIVATION;
    }
    n->saved[n->n_saved++] = alias;
}

/* Ends alias's saving; the block is tagged a temporary again if it outlives the save (keep:
 * the alias lives on; otherwise only where another tensor holds the block, as it is about to
 * be freed). */
static void unsave_tag(vram_node *n, vram_tensor *alias, int keep) {
    vram_storage *st = alias->st;
    if (--st->saved == 0 && st->tag == VRAM_TAG_ACTIVATION && (keep || atomic_load(&st->refs) > 1)) {
        if (vram_allocator_set_tag(n->rt->alloc, st->data, VRAM_TAG_TEMPORARY) == VRAM_OK) st->tag = VRAM_TAG_TEMPORARY;
    }
}

static void unsave(vram_node *n, vram_tensor *alias) {
    if (!alias) return; /* (a save that found no host memory) */
    unsave_tag(n, alias, 0);
    vram_tensor_free(alias);
}

vram_tensor *vram_node_take_saved(vram_node *n, int i) {
    vram_tensor *alias = n->saved[i];
    n->saved[i] = NULL; /* (node_release_graph skips the hole) */
    if (alias) unsave_tag(n, alias, 1);
    return alias;
}

/* Drops what the node holds for backward: saved tensors, edges, context. */
static void node_release_graph(vram_node *n) {
    for (int i = 0; i < n->n_saved; i++) unsave(n, n->saved[i]);
    n->n_saved = 0;
    for (int i = 0; i < n->n_in; i++) {
        if (n->next[i]) vram_node_unref(n->next[i]);
        vram_tensor_free(n->leaf[i]);
        n->next[i] = NULL;
        n->leaf[i] = NULL;
    }
    if (n->release_ctx) n->release_ctx(n);
    n->release_ctx = NULL;
    n->ctx = NULL;
    vram_tensor_free(n->pending);
    n->pending = NULL;
}

/* Whether t is held by its one reference alone (no other tensor, alias or saved view of its block). */
static int exclusive(const vram_tensor *t) {
    return atomic_load(&t->refs) == 1 && atomic_load(&t->st->refs) == 1 && vram_tensor_is_contiguous(t) &&
           t->offset == 0 && !t->grad_fn;
}

/* dst += src in place when dst is exclusively ours and contiguous; otherwise a new sum. Under
 * vram_grad_adopt() a node's first gradient is taken by reference even where something else holds
 * it too (an add hands one tensor to both inputs): a later one then sums into a fresh block
 * unless the other holders are gone by then (copy-on-write), so no holder sees another's sum. */
static vram_status accumulate(vram_tensor **dst, vram_tensor *src, vram_tag tag) {
    int adopt = src->rt->grad_adopt;
    if (!*dst) {
        /* (contiguous from offset 0: the backward functions read a pending gradient as one) */
        if (adopt && tag == VRAM_TAG_TEMPORARY && src->st->tag == VRAM_TAG_TEMPORARY && !src->grad_fn &&
            vram_tensor_is_contiguous(src) && src->offset == 0) {
            *dst = vram_tensor_retain(src);
            return VRAM_OK;
        }
        if (exclusive(src)) {
            if (src->st->tag != tag) {
                vram_status s = vram_allocator_set_tag(src->rt->alloc, src->st->data, tag);
                if (s != VRAM_OK) return s;
                src->st->tag = tag;
            }
            *dst = vram_tensor_retain(src);
            return VRAM_OK;
        }
        vram_tensor *c = NULL;
        vram_status s = vram_tensor_empty_like(src, tag, &c);
        if (s != VRAM_OK) return s;
        vram_tensor_copy(c, src);
        *dst = c;
        return VRAM_OK;
    }
    vram_tensor *d = *dst;
    if (!vram_shape_equal(d, src)) {
        char a[96], b[96];
        return vram_error(VRAM_ERR_INTERNAL, "backward: gradient shape %s does not match %s", SHAPE_STR(src, a),
                          SHAPE_STR(d, b));
    }
    /* Shared (adopted above, which only a temporary gradient is): the sum goes to a block of our
     * own. A parameter's gradient is added to where it is, shared or not (it may be a view into a
     * data-parallel bucket). */
    if (adopt && tag == VRAM_TAG_TEMPORARY && !exclusive(d)) {
        vram_tensor *c = NULL;
        vram_status s = vram_tensor_empty_like(d, tag, &c);
        if (s != VRAM_OK) return s;
        vram_tensor_copy(c, d);
        vram_tensor_free(d);
        *dst = d = c;
    }
    vram_kview dv, sv;
    vram_kview_of(d, &dv);
    vram_kview_of(src, &sv);
    d->rt->k->accumulate(&dv, &sv);
    return VRAM_OK;
}

vram_tensor *vram_node_grad_dest(const vram_node *n, int i, const vram_tensor *like) {
    vram_node *m = n->next[i];
    vram_tensor *d = m ? m->pending : NULL;
    if (!d || !n->rt->grad_adopt || !n->rt->k->layer_norm_backward_adds_gx || !exclusive(d) ||
        d->dtype != like->dtype || !vram_shape_equal(d, like))
        return NULL;
    return d;
}

typedef struct node_vec {
    vram_node **v;
    size_t n, cap;
} node_vec;

static int vec_push(node_vec *v, vram_node *x) {
    if (v->n == v->cap) {
        size_t cap = v->cap ? v->cap * 2 : 64;
        vram_node **p = realloc(v->v, cap * sizeof *p);
        if (!p) return 0;
        v->v = p;
        v->cap = cap;
    }
    v->v[v->n++] = x;
    return 1;
}

vram_status vram_backward(vram_tensor *root, const vram_tensor *grad) {
    if (!root) return vram_error(VRAM_ERR_INVALID_ARG, "backward: null tensor");
    if (!needs_grad(root)) return vram_error(VRAM_ERR_STATE, "backward: the tensor does not require grad and has no grad_fn");
    vram_tensor *g0 = NULL;
    vram_status s;
    root->rt->grad_adopt = vram_grad_adopt();
    if (grad) {
        if (!vram_shape_equal(root, grad)) {
            char a[96], b[96];
            return vram_error(VRAM_ERR_SHAPE, "backward: gradient %s for a tensor of shape %s", SHAPE_STR(grad, a),
                              SHAPE_STR(root, b));
        }
        s = vram_tensor_empty_like(root, VRAM_TAG_TEMPORARY, &g0);
        if (s != VRAM_OK) return s;
        vram_tensor_copy(g0, grad);
    } else {
        if (vram_tensor_numel(root) != 1)
            return vram_error(VRAM_ERR_SHAPE, "backward: a gradient is needed for a non-scalar root (%lld elements)",
                              (long long)vram_tensor_numel(root));
        s = vram_tensor_empty_like(root, VRAM_TAG_TEMPORARY, &g0);
        if (s != VRAM_OK) return s;
        vram_tensor_fill(g0, 1.0);
    }
    if (!root->grad_fn) { /* a leaf: its gradient is g0 */
        s = accumulate(&root->grad, g0, root->grad_is_temporary ? VRAM_TAG_TEMPORARY : VRAM_TAG_GRADIENT);
        vram_tensor_free(g0);
        return s;
    }
    vram_node *rn = root->grad_fn;
    if (!rn->backward) {
        vram_tensor_free(g0);
        return vram_error(VRAM_ERR_STATE, "backward: the graph through %s was already consumed by an earlier backward", rn->name);
    }

    vram_grad_hook hook = root->rt->on_grad;
    void *hook_ctx = root->rt->on_grad_ctx;
    /* 1. collect (each collected node retained for the duration) */
    node_vec all = {0}, stack = {0};
    s = VRAM_OK;
    /* A node is marked and retained once it is on the stack; from there it moves to `all`. On
     * a failure, those still on the stack are let go here and those in `all` at the end. */
    if (!vec_push(&stack, rn)) s = VRAM_ERR_HOST_MEMORY;
    else rn->visited = 1, atomic_fetch_add(&rn->refs, 1);
    while (s == VRAM_OK && stack.n) {
        vram_node *n = stack.v[--stack.n];
        if (!vec_push(&all, n)) {
            stack.n++; /* (still in its slot) */
            s = VRAM_ERR_HOST_MEMORY;
            break;
        }
        /* With a gradient hook, count each leaf's edges: its gradient is final when the last has run. */
        for (int i = 0; hook && i < n->n_in; i++)
            if (n->leaf[i]) n->leaf[i]->grad_uses++;
        for (int i = 0; i < n->n_in && s == VRAM_OK; i++) {
            vram_node *m = n->next[i];
            if (!m) continue;
            if (!m->visited) {
                if (!vec_push(&stack, m)) {
                    s = VRAM_ERR_HOST_MEMORY;
                    break;
                }
                m->visited = 1;
                atomic_fetch_add(&m->refs, 1);
            }
            m->deps++;
        }
    }
    if (s != VRAM_OK) {
        for (size_t i = 0; i < stack.n; i++) {
            stack.v[i]->visited = 0;
            stack.v[i]->deps = 0;
            vram_node_unref(stack.v[i]);
        }
        s = vram_error(s, "backward: out of host memory for the graph walk");
    }

    /* 2-4. run */
    rn->pending = g0;
    rn->seed_one = grad == NULL; /* (a node may skip reading a seed it knows: the classifier) */
    stack.n = 0;
    if (s == VRAM_OK && !vec_push(&stack, rn)) s = vram_error(VRAM_ERR_HOST_MEMORY, "backward: out of host memory");
    vram_tensor *gin_small[8];
    while (s == VRAM_OK && stack.n) {
        vram_node *n = stack.v[--stack.n];
        vram_tensor **gin = n->n_in <= 8 ? gin_small : calloc((size_t)n->n_in, sizeof *gin);
        if (!gin) {
            s = vram_error(VRAM_ERR_HOST_MEMORY, "backward: out of host memory");
            break;
        }
        memset(gin, 0, sizeof *gin * (size_t)n->n_in);
        int holes = 0;
        for (int i = 0; i < n->n_saved; i++) holes |= !n->saved[i];
        if (holes && n->backward) {
            s = vram_error(VRAM_ERR_HOST_MEMORY, "backward: %s lost a saved tensor: host out of memory", n->name);
        } else if (n->pending && n->backward) {
            s = n->backward(n, n->pending, gin);
        } else if (!n->backward) {
            s = vram_error(VRAM_ERR_STATE, "backward: the graph through %s was already consumed", n->name);
        }
        n->backward = NULL; /* consumed */
        for (int i = 0; i < n->n_in; i++) {
            vram_node *m = n->next[i];
            if (s == VRAM_OK && gin[i]) {
                if (m) {
                    s = accumulate(&m->pending, gin[i], VRAM_TAG_TEMPORARY);
                } else if (n->leaf[i]) {
                    vram_tensor *leaf = n->leaf[i];
                    s = accumulate(&leaf->grad, gin[i], leaf->grad_is_temporary ? VRAM_TAG_TEMPORARY : VRAM_TAG_GRADIENT);
                }
            }
            if (hook && n->leaf[i] && --n->leaf[i]->grad_uses == 0 && s == VRAM_OK) s = hook(hook_ctx, n->leaf[i]);
            vram_tensor_free(gin[i]);
            if (m && --m->deps == 0 && s == VRAM_OK && !vec_push(&stack, m))
                s = vram_error(VRAM_ERR_HOST_MEMORY, "backward: out of host memory");
        }
        if (gin != gin_small) free(gin);
        node_release_graph(n);
    }
    for (size_t i = 0; i < all.n; i++) {
        all.v[i]->visited = 0;
        all.v[i]->deps = 0;
        for (int j = 0; hook && s != VRAM_OK && j < all.v[i]->n_in; j++) /* (nodes that did not run) */
            if (all.v[i]->leaf[j]) all.v[i]->leaf[j]->grad_uses = 0;
        if (s != VRAM_OK) node_release_graph(all.v[i]);
        vram_node_unref(all.v[i]);
    }
    free(all.v);
    free(stack.v);
    return s;
}

/* ---- checkpoint ---- */

typedef struct ckpt_ctx {
    vram_checkpoint_fn fn;
    void *user;
    uint64_t rng[4];
} ckpt_ctx;

static void ckpt_release(vram_node *n) { free(n->ctx); }

static vram_status ckpt_backward(vram_node *n, vram_tensor *gout, vram_tensor **gin) {
    ckpt_ctx *c = n->ctx;
    vram_runtime *rt = n->rt;
    int k = n->n_saved;
    vram_tensor *in[8] = {0};
    vram_status s = VRAM_OK;
    for (int i = 0; i < k && s == VRAM_OK; i++) {
        s = vram_tensor_detach(n->saved[i], &in[i]);
        if (s == VRAM_OK && vram_node_needs(n, i)) {
            in[i]->requires_grad = 1;
            in[i]->grad_is_temporary = 1;
        }
    }
    uint64_t now[4];
    vram_runtime_rng_get(rt, now);
    vram_runtime_rng_set(rt, c->rng);
    int depth = no_grad_depth;
    no_grad_depth = 0;
    vram_tensor *y = NULL;
    if (s == VRAM_OK) s = c->fn(c->user, k, in, &y);
    no_grad_depth = depth;
    vram_runtime_rng_set(rt, now);
    /* The inputs are held by `in` now; drop the node's own saved aliases so the recomputation
     * is the only copy of this segment's activations. */
    for (int i = 0; i < n->n_saved; i++) unsave(n, n->saved[i]);
    n->n_saved = 0;
    if (s == VRAM_OK && needs_grad(y)) s = vram_backward(y, gout);
    for (int i = 0; i < k; i++) {
        if (s == VRAM_OK && in[i] && in[i]->grad) gin[i] = vram_tensor_retain(in[i]->grad);
        vram_tensor_free(in[i]);
    }
    vram_tensor_free(y);
    return s;
}

vram_status vram_checkpoint(vram_runtime *rt, vram_checkpoint_fn fn, void *user, int n, vram_tensor *const *inputs,
                            vram_tensor **out) {
    if (!rt || !fn || !out || n < 0 || n > 8 || (n && !inputs))
        return vram_error(VRAM_ERR_INVALID_ARG, "checkpoint: bad arguments (1 to 8 inputs)");
    ckpt_ctx *c = calloc(1, sizeof *c);
    if (!c) return vram_error(VRAM_ERR_HOST_MEMORY, "checkpoint: out of host memory");
    c->fn = fn;
    c->user = user;
    vram_runtime_rng_get(rt, c->rng);
    int record = vram_should_record(n, inputs);
    vram_tensor *y = NULL;
    no_grad_depth++;
    vram_status s = fn(user, n, inputs, &y);
    no_grad_depth--;
    if (s != VRAM_OK) {
        free(c);
        return s;
    }
    if (record) {
        vram_node *node = vram_node_attach(y, "checkpoint", ckpt_backward, n, inputs);
        if (!node) {
            free(c);
            vram_tensor_free(y);
            return vram_error(VRAM_ERR_HOST_MEMORY, "checkpoint: out of host memory");
        }
        node->ctx = c;
        node->release_ctx = ckpt_release;
        for (int i = 0; i < n; i++) vram_node_save(node, inputs[i]);
    } else {
        free(c);
    }
    *out = y;
    return VRAM_OK;
}
