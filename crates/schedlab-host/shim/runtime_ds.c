/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * BPF data structures and helpers that need no simulator state, included
 * by runtime.c: allocated objects (bpf_obj_new / bpf_obj_drop /
 * bpf_refcount_acquire), linked lists and red-black trees of such
 * objects, dynptrs, resilient spin locks and string helpers. Written for
 * schedlab from the kernel's documented semantics (kernel/bpf/helpers.c,
 * rqspinlock.c, Documentation/bpf/graph_ds_impl.rst).
 */

/* ---- allocated objects ---------------------------------------------------- */

/*
 * Natively there is no BTF: the shim's bpf_core_type_id_local(type) is
 * sizeof(type), so bpf_obj_new_impl() receives the object's size. Each
 * object has a header in front with its reference count (the object's own
 * struct bpf_refcount field is not used). An object whose last reference
 * goes is freed when the outermost call into the scheduler returns, as
 * the kernel frees after an RCU grace period.
 */
/* <stdlib.h> clashes with vmlinux.h's typedefs. */
void *calloc(size_t nmemb, size_t size);
void free(void *ptr);

#define OBJ_MAGIC 0x6f626a73u

struct obj_hdr {
	u64 size;
	u32 refs;
	u32 magic;
	struct obj_hdr *next_dead;
	u64 __pad;
};

static struct obj_hdr *dead_objs;
static u64 live_objs;

static struct obj_hdr *hdr_of(void *p)
{
	struct obj_hdr *h = (struct obj_hdr *)p - 1;

	return h->magic == OBJ_MAGIC ? h : NULL;
}

void *bpf_obj_new_impl(u64 local_type_id, void *meta)
{
	struct obj_hdr *h;

	(void)meta;
	if (!local_type_id || local_type_id > (1U << 20))
		return NULL;
	h = calloc(1, sizeof(*h) + local_type_id);
	if (!h)
		return NULL;
	h->size = local_type_id;
	h->refs = 1;
	h->magic = OBJ_MAGIC;
	live_objs++;
	return h + 1;
}

void *bpf_percpu_obj_new_impl(u64 local_type_id, void *meta)
{
	return bpf_obj_new_impl(local_type_id, meta);
}

void bpf_obj_drop_impl(void *p, void *meta)
{
	struct obj_hdr *h;

	(void)meta;
	if (!p)
		return;
	h = hdr_of(p);
	if (!h || !h->refs) {
		h_schedlab_error("bpf_obj_drop: not a live object from bpf_obj_new()");
		return;
	}
	if (--h->refs)
		return;
	end_call_needed();
	h->magic = 0;
	h->next_dead = dead_objs;
	dead_objs = h;
	live_objs--;
}

void bpf_percpu_obj_drop_impl(void *p, void *meta)
{
	bpf_obj_drop_impl(p, meta);
}

void *bpf_refcount_acquire_impl(void *p, void *meta)
{
	struct obj_hdr *h;

	(void)meta;
	h = p ? hdr_of(p) : NULL;
	if (!h || !h->refs) {
		h_schedlab_error("bpf_refcount_acquire: not a live object from bpf_obj_new()");
		return NULL;
	}
	h->refs++;
	return p;
}

static void free_dead_objs(void)
{
	while (dead_objs) {
		struct obj_hdr *h = dead_objs;

		dead_objs = h->next_dead;
		free(h);
	}
}

/* ---- lists ----------------------------------------------------------------- */

/* struct bpf_list_head is a list_head; a bpf_list_node a list_head and its owner. */
struct list_node_k {
	struct list_node_k *next, *prev;
	void *owner;
};

struct list_head_k {
	struct list_node_k *next, *prev;
};

_Static_assert(sizeof(struct list_node_k) <= sizeof(struct bpf_list_node), "bpf_list_node");
_Static_assert(sizeof(struct list_head_k) <= sizeof(struct bpf_list_head), "bpf_list_head");

/* The kernel's verifier requires the bpf_spin_lock next to the root held. */
static int graph_locked(const char *what)
{
	if (locks_held)
		return 1;
	char msg[128];

	snprintf(msg, sizeof(msg), "%s: the bpf_spin_lock protecting the collection is not held", what);
	h_schedlab_error(msg);
	return 0;
}

/* A zeroed head (fresh map value or object) is an empty list. */
static struct list_node_k *list_sentinel(struct bpf_list_head *head)
{
	struct list_head_k *h = (struct list_head_k *)head;

	if (!h->next)
		h->next = h->prev = (struct list_node_k *)h;
	return (struct list_node_k *)h;
}

static int list_add(struct bpf_list_head *head, struct bpf_list_node *node, int tail, const char *what)
{
	struct list_node_k *s, *n = (struct list_node_k *)node;

	if (!head || !node) {
		h_schedlab_error("bpf_list_push: NULL argument");
		return -EINVAL;
	}
	if (!graph_locked(what))
		return -EINVAL;
	if (n->owner)
		return -EINVAL;
	s = list_sentinel(head);
	if (tail) {
		n->prev = s->prev;
		n->next = s;
	} else {
		n->prev = s;
		n->next = s->next;
	}
	n->prev->next = n;
	n->next->prev = n;
	n->owner = head;
	return 0;
}

int bpf_list_push_front_impl(struct bpf_list_head *head, struct bpf_list_node *node, void *meta, u64 off)
{
	(void)meta;
	(void)off;
	return list_add(head, node, 0, "bpf_list_push_front");
}

int bpf_list_push_back_impl(struct bpf_list_head *head, struct bpf_list_node *node, void *meta, u64 off)
{
	(void)meta;
	(void)off;
	return list_add(head, node, 1, "bpf_list_push_back");
}

static struct bpf_list_node *list_take(struct bpf_list_head *head, int tail, int remove, const char *what)
{
	struct list_node_k *s, *n;

	if (!head || !graph_locked(what))
		return NULL;
	s = list_sentinel(head);
	n = tail ? s->prev : s->next;
	if (n == s)
		return NULL;
	if (remove) {
		n->prev->next = n->next;
		n->next->prev = n->prev;
		n->next = n->prev = NULL;
		n->owner = NULL;
	}
	return (struct bpf_list_node *)n;
}

struct bpf_list_node *bpf_list_pop_front(struct bpf_list_head *head)
{
	return list_take(head, 0, 1, "bpf_list_pop_front");
}

struct bpf_list_node *bpf_list_pop_back(struct bpf_list_head *head)
{
	return list_take(head, 1, 1, "bpf_list_pop_back");
}

struct bpf_list_node *bpf_list_front(struct bpf_list_head *head)
{
	return list_take(head, 0, 0, "bpf_list_front");
}

struct bpf_list_node *bpf_list_back(struct bpf_list_head *head)
{
	return list_take(head, 1, 0, "bpf_list_back");
}

/* ---- red-black trees -------------------------------------------------------- */

/*
 * struct bpf_rb_root is an rb_root_cached (root, leftmost); a bpf_rb_node
 * an rb_node (parent with the colour in bit 0, right, left) and its owner.
 * Insertion goes left while less(new, node), so equal keys keep their
 * insertion order, as rb_add_cached() does.
 */
struct rb_k {
	uintptr_t parent_color;
	struct rb_k *right, *left;
	void *owner;
};

struct rb_root_k {
	struct rb_k *root, *leftmost;
};

_Static_assert(sizeof(struct rb_k) <= sizeof(struct bpf_rb_node), "bpf_rb_node");
_Static_assert(sizeof(struct rb_root_k) <= sizeof(struct bpf_rb_root), "bpf_rb_root");

#define RB_RED 0
#define RB_BLACK 1

static struct rb_k *rb_parent(struct rb_k *n)
{
	return (struct rb_k *)(n->parent_color & ~(uintptr_t)1);
}

static int rb_color(struct rb_k *n)
{
	return n ? (int)(n->parent_color & 1) : RB_BLACK;
}

static void rb_set(struct rb_k *n, struct rb_k *parent, int color)
{
	n->parent_color = (uintptr_t)parent | (uintptr_t)color;
}

static void rb_set_parent(struct rb_k *n, struct rb_k *parent)
{
	if (n)
		rb_set(n, parent, rb_color(n));
}

static void rb_set_color(struct rb_k *n, int color)
{
	if (n)
		rb_set(n, rb_parent(n), color);
}

/* Makes @nw take @old's place under @old's parent. */
static void rb_replace_child(struct rb_root_k *t, struct rb_k *old, struct rb_k *nw, struct rb_k *parent)
{
	if (!parent)
		t->root = nw;
	else if (parent->left == old)
		parent->left = nw;
	else
		parent->right = nw;
}

static void rb_rotate(struct rb_root_k *t, struct rb_k *x, int left)
{
	struct rb_k *y = left ? x->right : x->left, *p = rb_parent(x);

	if (left) {
		x->right = y->left;
		rb_set_parent(y->left, x);
		y->left = x;
	} else {
		x->left = y->right;
		rb_set_parent(y->right, x);
		y->right = x;
	}
	rb_set(y, p, rb_color(y));
	rb_replace_child(t, x, y, p);
	rb_set(x, y, rb_color(x));
}

static void rb_insert_fixup(struct rb_root_k *t, struct rb_k *z)
{
	while (rb_color(rb_parent(z)) == RB_RED) {
		struct rb_k *p = rb_parent(z), *g = rb_parent(p);
		int pleft = g->left == p;
		struct rb_k *u = pleft ? g->right : g->left;

		if (rb_color(u) == RB_RED) {
			rb_set_color(p, RB_BLACK);
			rb_set_color(u, RB_BLACK);
			rb_set_color(g, RB_RED);
			z = g;
			continue;
		}
		if (z == (pleft ? p->right : p->left)) {
			z = p;
			rb_rotate(t, z, pleft);
			p = rb_parent(z);
		}
		rb_set_color(p, RB_BLACK);
		rb_set_color(g, RB_RED);
		rb_rotate(t, g, !pleft);
	}
	rb_set_color(t->root, RB_BLACK);
}

static struct rb_k *rb_min(struct rb_k *n)
{
	while (n && n->left)
		n = n->left;
	return n;
}

static struct rb_k *rb_next(struct rb_k *n)
{
	struct rb_k *p;

	if (n->right)
		return rb_min(n->right);
	while ((p = rb_parent(n)) && n == p->right)
		n = p;
	return p;
}

/* Moves subtree @v (may be NULL) into @u's place. */
static void rb_transplant(struct rb_root_k *t, struct rb_k *u, struct rb_k *v)
{
	rb_replace_child(t, u, v, rb_parent(u));
	rb_set_parent(v, rb_parent(u));
}

static void rb_erase(struct rb_root_k *t, struct rb_k *z)
{
	struct rb_k *x, *xp, *y = z;
	int ycolor = rb_color(y);

	if (t->leftmost == z)
		t->leftmost = rb_next(z);
	if (!z->left) {
		x = z->right;
		xp = rb_parent(z);
		rb_transplant(t, z, z->right);
	} else if (!z->right) {
		x = z->left;
		xp = rb_parent(z);
		rb_transplant(t, z, z->left);
	} else {
		y = rb_min(z->right);
		ycolor = rb_color(y);
		x = y->right;
		if (rb_parent(y) == z) {
			xp = y;
		} else {
			xp = rb_parent(y);
			rb_transplant(t, y, y->right);
			y->right = z->right;
			rb_set_parent(y->right, y);
		}
		rb_transplant(t, z, y);
		y->left = z->left;
		rb_set_parent(y->left, y);
		rb_set_color(y, rb_color(z));
	}
	if (ycolor != RB_BLACK)
		return;
	/* Fix the double black at x (possibly NULL, whose parent is xp). */
	while (x != t->root && rb_color(x) == RB_BLACK) {
		int xleft = xp->left == x;
		struct rb_k *w = xleft ? xp->right : xp->left;

		if (rb_color(w) == RB_RED) {
			rb_set_color(w, RB_BLACK);
			rb_set_color(xp, RB_RED);
			rb_rotate(t, xp, xleft);
			w = xleft ? xp->right : xp->left;
		}
		if (rb_color(w->left) == RB_BLACK && rb_color(w->right) == RB_BLACK) {
			rb_set_color(w, RB_RED);
			x = xp;
			xp = rb_parent(x);
			continue;
		}
		if (rb_color(xleft ? w->right : w->left) == RB_BLACK) {
			rb_set_color(xleft ? w->left : w->right, RB_BLACK);
			rb_set_color(w, RB_RED);
			rb_rotate(t, w, !xleft);
			w = xleft ? xp->right : xp->left;
		}
		rb_set_color(w, rb_color(xp));
		rb_set_color(xp, RB_BLACK);
		rb_set_color(xleft ? w->right : w->left, RB_BLACK);
		rb_rotate(t, xp, xleft);
		x = t->root;
		break;
	}
	rb_set_color(x, RB_BLACK);
}

typedef bool (*rb_less_fn)(struct bpf_rb_node *a, const struct bpf_rb_node *b);

int bpf_rbtree_add_impl(struct bpf_rb_root *root, struct bpf_rb_node *node, void *less, void *meta, u64 off)
{
	struct rb_root_k *t = (struct rb_root_k *)root;
	struct rb_k *n = (struct rb_k *)node, *parent = NULL, **link;
	rb_less_fn lessf = (rb_less_fn)less;
	int leftmost = 1;

	(void)meta;
	(void)off;
	if (!root || !node || !less) {
		h_schedlab_error("bpf_rbtree_add: NULL argument");
		return -EINVAL;
	}
	if (!graph_locked("bpf_rbtree_add"))
		return -EINVAL;
	if (n->owner)
		return -EINVAL;
	link = &t->root;
	while (*link) {
		parent = *link;
		if (lessf(node, (const struct bpf_rb_node *)parent)) {
			link = &parent->left;
		} else {
			link = &parent->right;
			leftmost = 0;
		}
	}
	n->left = n->right = NULL;
	rb_set(n, parent, RB_RED);
	*link = n;
	if (leftmost)
		t->leftmost = n;
	n->owner = root;
	rb_insert_fixup(t, n);
	return 0;
}

struct bpf_rb_node *bpf_rbtree_first(struct bpf_rb_root *root)
{
	if (!root || !graph_locked("bpf_rbtree_first"))
		return NULL;
	return (struct bpf_rb_node *)((struct rb_root_k *)root)->leftmost;
}

/* NULL if @node is not in this tree (as the kernel's owner check). */
struct bpf_rb_node *bpf_rbtree_remove(struct bpf_rb_root *root, struct bpf_rb_node *node)
{
	struct rb_k *n = (struct rb_k *)node;

	if (!root || !node || !graph_locked("bpf_rbtree_remove"))
		return NULL;
	if (n->owner != root)
		return NULL;
	rb_erase((struct rb_root_k *)root, n);
	n->left = n->right = NULL;
	n->parent_color = 0;
	n->owner = NULL;
	return node;
}

struct bpf_rb_node *bpf_rbtree_root(struct bpf_rb_root *root)
{
	if (!root || !graph_locked("bpf_rbtree_root"))
		return NULL;
	return (struct bpf_rb_node *)((struct rb_root_k *)root)->root;
}

struct bpf_rb_node *bpf_rbtree_left(struct bpf_rb_root *root, struct bpf_rb_node *node)
{
	struct rb_k *n = (struct rb_k *)node;

	if (!root || !node || !graph_locked("bpf_rbtree_left") || n->owner != root)
		return NULL;
	return (struct bpf_rb_node *)n->left;
}

struct bpf_rb_node *bpf_rbtree_right(struct bpf_rb_root *root, struct bpf_rb_node *node)
{
	struct rb_k *n = (struct rb_k *)node;

	if (!root || !node || !graph_locked("bpf_rbtree_right") || n->owner != root)
		return NULL;
	return (struct bpf_rb_node *)n->right;
}

/* ---- dynptrs ---------------------------------------------------------------- */

/* struct bpf_dynptr_kern: data, size with type and read-only bits, offset. */
struct dynptr_k {
	u8 *data;
	u32 size;
	u32 offset;
};

_Static_assert(sizeof(struct dynptr_k) == sizeof(struct bpf_dynptr), "bpf_dynptr");

#define DYNPTR_MAX_SIZE ((1U << 24) - 1)
#define DYNPTR_RDONLY (1U << 31)
#define DYNPTR_TYPE_SHIFT 28
enum { DYNPTR_LOCAL = 1, DYNPTR_RINGBUF = 2 };

static struct dynptr_k *dk(const struct bpf_dynptr *p)
{
	return (struct dynptr_k *)p;
}

static u32 dsize(const struct dynptr_k *d)
{
	return d->size & DYNPTR_MAX_SIZE;
}

static u32 dtype(const struct dynptr_k *d)
{
	return (d->size >> DYNPTR_TYPE_SHIFT) & 7;
}

static void dynptr_init(struct dynptr_k *d, void *data, u32 type, u32 size, int rdonly)
{
	d->data = data;
	d->offset = 0;
	d->size = size | (type << DYNPTR_TYPE_SHIFT) | (rdonly ? DYNPTR_RDONLY : 0);
}

static void dynptr_null(struct dynptr_k *d)
{
	memset(d, 0, sizeof(*d));
}

long bpf_dynptr_from_mem(void *data, u32 size, u64 flags, struct bpf_dynptr *ptr)
{
	if (!ptr)
		return -EINVAL;
	if (size > DYNPTR_MAX_SIZE) {
		dynptr_null(dk(ptr));
		return -E2BIG;
	}
	if (flags) {
		dynptr_null(dk(ptr));
		return -EINVAL;
	}
	dynptr_init(dk(ptr), data, DYNPTR_LOCAL, size, 0);
	return 0;
}

long bpf_ringbuf_reserve_dynptr(void *ringbuf, u32 size, u64 flags, struct bpf_dynptr *ptr)
{
	void *rec;

	if (!ptr)
		return -EINVAL;
	dynptr_null(dk(ptr));
	if (size > DYNPTR_MAX_SIZE)
		return -E2BIG;
	if (flags)
		return -EINVAL;
	rec = h_bpf_ringbuf_reserve(ringbuf, size, 0);
	if (!rec)
		return -EINVAL;
	dynptr_init(dk(ptr), rec, DYNPTR_RINGBUF, size, 0);
	return 0;
}

static void ringbuf_dynptr_end(struct bpf_dynptr *ptr, u64 flags, int discard)
{
	struct dynptr_k *d = dk(ptr);

	if (!d || !d->data)
		return;
	if (dtype(d) != DYNPTR_RINGBUF) {
		h_schedlab_error("bpf_ringbuf_submit_dynptr: not a ring buffer dynptr");
		return;
	}
	if (discard)
		h_bpf_ringbuf_discard(d->data, flags);
	else
		h_bpf_ringbuf_submit(d->data, flags);
	dynptr_null(d);
}

void bpf_ringbuf_submit_dynptr(struct bpf_dynptr *ptr, u64 flags)
{
	ringbuf_dynptr_end(ptr, flags, 0);
}

void bpf_ringbuf_discard_dynptr(struct bpf_dynptr *ptr, u64 flags)
{
	ringbuf_dynptr_end(ptr, flags, 1);
}

long bpf_dynptr_read(void *dst, u32 len, const struct bpf_dynptr *src, u32 offset, u64 flags)
{
	const struct dynptr_k *d = dk(src);

	if (!d || !d->data || flags)
		return -EINVAL;
	if ((u64)offset + len > dsize(d))
		return -E2BIG;
	memmove(dst, d->data + d->offset + offset, len);
	return 0;
}

long bpf_dynptr_write(const struct bpf_dynptr *dst, u32 offset, void *src, u32 len, u64 flags)
{
	const struct dynptr_k *d = dk(dst);

	if (!d || !d->data || (d->size & DYNPTR_RDONLY) || flags)
		return -EINVAL;
	if ((u64)offset + len > dsize(d))
		return -E2BIG;
	memmove(d->data + d->offset + offset, src, len);
	return 0;
}

void *bpf_dynptr_data(const struct bpf_dynptr *ptr, u32 offset, u32 len)
{
	const struct dynptr_k *d = dk(ptr);

	if (!d || !d->data || (d->size & DYNPTR_RDONLY))
		return NULL;
	if ((u64)offset + len > dsize(d))
		return NULL;
	return d->data + d->offset + offset;
}

u32 bpf_dynptr_size(const struct bpf_dynptr *p)
{
	return p && dk(p)->data ? dsize(dk(p)) : 0;
}

bool bpf_dynptr_is_null(const struct bpf_dynptr *p)
{
	return !p || !dk(p)->data;
}

bool bpf_dynptr_is_rdonly(const struct bpf_dynptr *p)
{
	return p && dk(p)->data && (dk(p)->size & DYNPTR_RDONLY);
}

int bpf_dynptr_adjust(const struct bpf_dynptr *p, u32 start, u32 end)
{
	struct dynptr_k *d = dk(p);

	if (!d || !d->data)
		return -EINVAL;
	if (start > end)
		return -EINVAL;
	if (end > dsize(d))
		return -ERANGE;
	d->offset += start;
	d->size = (d->size & ~DYNPTR_MAX_SIZE) | (end - start);
	return 0;
}

int bpf_dynptr_clone(const struct bpf_dynptr *p, struct bpf_dynptr *clone)
{
	if (!p || !dk(p)->data) {
		if (clone)
			dynptr_null(dk(clone));
		return -EINVAL;
	}
	*dk(clone) = *dk(p);
	return 0;
}

/* A pointer into the dynptr's memory (no copy is needed natively). */
void *bpf_dynptr_slice(const struct bpf_dynptr *p, u32 offset, void *buffer, u32 buffer__szk)
{
	const struct dynptr_k *d = dk(p);

	(void)buffer;
	if (!d || !d->data || (u64)offset + buffer__szk > dsize(d))
		return NULL;
	return d->data + d->offset + offset;
}

void *bpf_dynptr_slice_rdwr(const struct bpf_dynptr *p, u32 offset, void *buffer, u32 buffer__szk)
{
	if (bpf_dynptr_is_rdonly(p))
		return NULL;
	return bpf_dynptr_slice(p, offset, buffer, buffer__szk);
}

/* At most BPF_MAX_USER_RINGBUF_SAMPLES (128) records per call. */
long bpf_user_ringbuf_drain(void *map, void *callback_fn, void *ctx, u64 flags)
{
	long (*cb)(struct bpf_dynptr *, void *) = (long (*)(struct bpf_dynptr *, void *))callback_fn;
	long n = 0;

	if (flags & ~(u64)(BPF_RB_NO_WAKEUP | BPF_RB_FORCE_WAKEUP) || !cb)
		return -EINVAL;
	while (n < 128) {
		struct bpf_dynptr dp;
		void *data = NULL;
		long len = h_schedlab_user_ringbuf_peek(map, &data);
		long stop;

		if (len < 0)
			return len == -ENODATA ? n : len;
		dynptr_init(dk(&dp), data, DYNPTR_LOCAL, (u32)len, 1);
		stop = cb(&dp, ctx);
		h_schedlab_user_ringbuf_release(map);
		n++;
		if (stop)
			break;
	}
	return n;
}

/* ---- resilient spin locks (kernel/bpf/rqspinlock.c) ----------------------- */

/*
 * Single-threaded, a lock that is already held can only be the caller's
 * own: the kernel's AA detection returns -EDEADLK instead of spinning.
 * Up to 31 may be held at once; they are released in reverse order.
 */
#define RES_LOCKS_MAX 31
static struct bpf_res_spin_lock *res_held[RES_LOCKS_MAX];
static u32 nr_res_held;

int bpf_res_spin_lock(struct bpf_res_spin_lock *lock)
{
	if (!lock) {
		h_schedlab_error("bpf_res_spin_lock: NULL lock");
		return -EINVAL;
	}
	if (lock->val || nr_res_held >= RES_LOCKS_MAX)
		return -EDEADLK;
	end_call_needed();
	lock->val = 1;
	res_held[nr_res_held++] = lock;
	return 0;
}

void bpf_res_spin_unlock(struct bpf_res_spin_lock *lock)
{
	if (!lock || !nr_res_held || res_held[nr_res_held - 1] != lock) {
		h_schedlab_error("bpf_res_spin_unlock: not the most recently taken lock");
		return;
	}
	lock->val = 0;
	nr_res_held--;
}

int bpf_res_spin_lock_irqsave(struct bpf_res_spin_lock *lock, unsigned long *flags__irq_flag)
{
	if (flags__irq_flag)
		*flags__irq_flag = 0;
	return bpf_res_spin_lock(lock);
}

void bpf_res_spin_unlock_irqrestore(struct bpf_res_spin_lock *lock, unsigned long *flags__irq_flag)
{
	(void)flags__irq_flag;
	bpf_res_spin_unlock(lock);
}

void bpf_local_irq_save(unsigned long *flags__irq_flag)
{
	if (flags__irq_flag)
		*flags__irq_flag = 0;
}

void bpf_local_irq_restore(unsigned long *flags__irq_flag)
{
	(void)flags__irq_flag;
}

void bpf_preempt_disable(void)
{
}

void bpf_preempt_enable(void)
{
}

/* Releases what a call left held; returns whether any was. */
static int res_locks_reset(void)
{
	int held = nr_res_held != 0;

	while (nr_res_held)
		res_held[--nr_res_held]->val = 0;
	return held;
}

/* ---- strings ---------------------------------------------------------------- */

/* The kernel's strncmp(): -1, 0 or 1 at the first differing byte. */
long bpf_strncmp(const char *s1, u32 s1_sz, const char *s2)
{
	for (u32 i = 0; i < s1_sz; i++) {
		unsigned char a = (unsigned char)s1[i], b = (unsigned char)s2[i];

		if (a != b)
			return a < b ? -1 : 1;
		if (!a)
			break;
	}
	return 0;
}

/* ---- tracing program context -------------------------------------------------- */

/*
 * fentry/fexit programs get the traced function's arguments as u64s, then
 * (fexit) its return value; the BPF trampoline stores the number of
 * arguments in the word before them (arch_prepare_bpf_trampoline(), and
 * the verifier's inlined get_func_arg / get_func_ret / get_func_arg_cnt
 * read it there). A host that runs a tracing program lays its context out
 * the same way.
 */
long bpf_get_func_arg(void *ctx, u32 n, u64 *value)
{
	const u64 *args = ctx;

	if ((u64)n >= args[-1]) {
		*value = 0;
		return -EINVAL;
	}
	*value = args[n];
	return 0;
}

long bpf_get_func_ret(void *ctx, u64 *value)
{
	const u64 *args = ctx;

	*value = args[args[-1]];
	return 0;
}

long bpf_get_func_arg_cnt(void *ctx)
{
	return (long)((const u64 *)ctx)[-1];
}

/* ---- kernel variables ------------------------------------------------------------ */

/*
 * cpufreq_cpu_data (drivers/cpufreq/cpufreq.c): each CPU's cpufreq policy.
 * The simulated machine has no cpufreq driver, so every CPU's policy is
 * NULL, as on a kernel without one; schedulers then keep their own
 * capacity. Sized for every possible CPU, since schedulers index it as an
 * array (scx_lavd reads `&cpufreq_cpu_data + cpu`).
 */
struct cpufreq_policy *cpufreq_cpu_data[SCHEDLAB_NR_CPUS];

/* ---- cgroup css iterator (kernel/bpf/cgroup_iter.c) ---------------------------- */

/*
 * bpf_iter_css_new/next/destroy: walks the css hierarchy from @start in
 * the given order. The walk itself is the host's (schedlab_css_next(),
 * host/cgroup.rs), over the simulator's cgroup tree: the next css after
 * @pos (NULL: the first). Layout: start, position, order.
 */
struct css_iter_k {
	struct cgroup_subsys_state *start;
	struct cgroup_subsys_state *pos;
	u64 order; /* BPF_CGROUP_ITER_*; bit 63: the walk has begun */
};

#define CSS_ITER_BEGUN (1ULL << 63)

_Static_assert(sizeof(struct css_iter_k) == sizeof(struct bpf_iter_css), "bpf_iter_css layout");

struct cgroup_subsys_state *schedlab_css_next(struct cgroup_subsys_state *start,
					      struct cgroup_subsys_state *pos, u64 order);

int bpf_iter_css_new(struct bpf_iter_css *it, struct cgroup_subsys_state *start, unsigned int flags)
{
	struct css_iter_k *k = (struct css_iter_k *)it;

	k->start = NULL;
	k->pos = NULL;
	k->order = 0;
	switch (flags) {
	case BPF_CGROUP_ITER_SELF_ONLY:
	case BPF_CGROUP_ITER_DESCENDANTS_PRE:
	case BPF_CGROUP_ITER_DESCENDANTS_POST:
	case BPF_CGROUP_ITER_ANCESTORS_UP:
	case BPF_CGROUP_ITER_CHILDREN:
		break;
	default:
		return -EINVAL;
	}
	k->start = start;
	k->order = flags;
	return 0;
}

struct cgroup_subsys_state *bpf_iter_css_next(struct bpf_iter_css *it)
{
	struct css_iter_k *k = (struct css_iter_k *)it;
	u64 order = k->order & ~CSS_ITER_BEGUN;

	if (!k->start)
		return NULL;
	if (k->order & CSS_ITER_BEGUN) {
		if (!k->pos)
			return NULL;
		k->pos = schedlab_css_next(k->start, k->pos, order);
	} else {
		k->order |= CSS_ITER_BEGUN;
		k->pos = schedlab_css_next(k->start, NULL, order);
	}
	return k->pos;
}

void bpf_iter_css_destroy(struct bpf_iter_css *it)
{
	struct css_iter_k *k = (struct css_iter_k *)it;

	k->start = NULL;
	k->pos = NULL;
}
