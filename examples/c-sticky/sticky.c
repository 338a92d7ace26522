/*
 * c-sticky: a sticky, capacity-weighted assignor for assignd, in C.
 *
 * 1. Every task stays on its current active owner if that member still
 *    subscribes to the task's topic and holds fewer tasks than its quota.
 *    A member's quota is its fair share of the tasks of its topics:
 *        quota = ceil(tasks_of_its_topics * capacity / capacity_of_their_subscribers)
 *    (for a group whose members subscribe to different topic sets, the
 *    share is summed topic by topic: sum over t of tasks(t) * capacity /
 *    subscriber_capacity(t)).
 * 2. Every other task goes to the least-loaded member subscribing to its
 *    topic, load being tasks / capacity, ties to the lower member index.
 *    When the group reports loads (a load unit and at least one task's
 *    load), load is the sum of the member's tasks' loads / its weight
 *    instead: its load capacity if every member declared one, else its
 *    capacity. A task whose load the host does not know (yet) counts as
 *    the mean of the known ones: unknown is not zero.
 * 3. Tasks of topics nobody subscribes to get no owner (0xFFFFFFFF).
 *
 * Param `sticky` (default "true"): "false" ignores the current owners and
 * computes a fresh balanced assignment.
 *
 * The bindings (plugin.h, plugin.c, plugin_component_type.o) are generated
 * by `wit-bindgen c` from guest-sdk/wit (see build.sh). Their ownership
 * rules, which this file follows:
 *   - An export owns its arguments: `assign` frees its input with
 *     exports_assignd_assignor_assignor_group_input_free().
 *   - What an export returns is freed after the call by the generated
 *     `cabi_post_*` functions with free(): every string or list in a return
 *     value must come from malloc (plugin_string_dup, never a literal).
 *   - An import borrows its arguments: the log message may live on the stack.
 * No stdio (printf, snprintf): it would import WASI, which the host refuses.
 * Numbers are formatted by hand below.
 */

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "plugin.h"

#define NO_MEMBER UINT32_MAX

typedef assignd_assignor_types_group_input_t group_input_t;
typedef assignd_assignor_types_assignment_t assignment_t;
typedef assignd_assignor_types_assign_error_t assign_error_t;

/* ---- Text without stdio: a bounded buffer for log lines and errors. ---- */

typedef struct {
    char buf[256];
    size_t len;
} text_t;

static void text_bytes(text_t *t, const void *bytes, size_t n) {
    if (n > sizeof t->buf - t->len)
        n = sizeof t->buf - t->len; /* truncate, never overflow */
    memcpy(t->buf + t->len, bytes, n);
    t->len += n;
}

static void text_str(text_t *t, const char *s) { text_bytes(t, s, strlen(s)); }

static void text_u64(text_t *t, uint64_t v) {
    char digits[20];
    size_t n = 0;
    do {
        digits[sizeof digits - ++n] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    text_bytes(t, digits + sizeof digits - n, n);
}

static void log_text(assignd_assignor_log_level_t level, const text_t *t) {
    plugin_string_t message = {(uint8_t *)t->buf, t->len}; /* borrowed */
    assignd_assignor_log_log(level, &message);
}

/* Fills `err` (its message copied to the heap: the post-return frees it). */
static bool fail(assign_error_t *err, uint8_t tag, const text_t *message) {
    err->tag = tag;
    plugin_string_t *s = tag == ASSIGND_ASSIGNOR_TYPES_ASSIGN_ERROR_INVALID_PARAM ? &err->val.invalid_param
                         : tag == ASSIGND_ASSIGNOR_TYPES_ASSIGN_ERROR_UNSUPPORTED_INPUT ? &err->val.unsupported_input
                                                                                        : &err->val.failed;
    plugin_string_dup_n(s, message->buf, message->len);
    return false;
}

static bool string_is(const plugin_string_t *s, const char *literal) {
    size_t n = strlen(literal);
    return s->len == n && memcmp(s->ptr, literal, n) == 0;
}

/* The value of param `key`, or NULL when the group does not set it. */
static const plugin_string_t *param(const group_input_t *in, const char *key) {
    for (size_t i = 0; i < in->params.len; i++)
        if (string_is(&in->params.ptr[i].key, key))
            return &in->params.ptr[i].value;
    return NULL;
}

/* ---- info ---- */

void exports_assignd_assignor_assignor_info(exports_assignd_assignor_assignor_assignor_info_t *ret) {
    plugin_string_dup(&ret->name, "c-sticky");
    plugin_string_dup(&ret->version, "0.2.0");
    plugin_string_dup(&ret->description,
                      "sticky, capacity-weighted (written in C): a task stays on its owner while the owner "
                      "subscribes to its topic and is under its fair share; the rest go to the least-loaded "
                      "subscriber, by reported load when the group has loads");
    ret->capabilities.learners = false;
    ret->capabilities.standbys = false;
    ret->capabilities.racks = false;
    ret->capabilities.load = true;

    ret->params.len = 1;
    ret->params.ptr = malloc(sizeof *ret->params.ptr);
    if (!ret->params.ptr)
        abort(); /* info() must not fail: trap */
    plugin_string_dup(&ret->params.ptr[0].name, "sticky");
    plugin_string_dup(&ret->params.ptr[0].default_value, "true");
    plugin_string_dup(&ret->params.ptr[0].description,
                      "true: keep current owners up to their fair share; false: ignore them and balance afresh");
}

/* ---- assign ---- */

/* The group, indexed: what the strategy looks up per topic and member. */
typedef struct {
    const group_input_t *in;
    size_t n_topics, n_members, n_tasks;
    uint64_t n_topic_tasks;    /* the sum of the topics' partitions: must be n_tasks */
    uint32_t *first_task;      /* n_topics + 1: topic t's tasks are first_task[t] .. first_task[t+1] */
    uint32_t *sub_start;       /* n_topics + 1: topic t's subscribers are sub_member[sub_start[t] .. sub_start[t+1]] */
    uint32_t *sub_member;      /* member indices, ascending within a topic */
    uint64_t *topic_capacity;  /* n_topics: total capacity of the topic's subscribers */
    uint32_t *capacity;        /* n_members: at least 1 */
    uint32_t *count;           /* n_members: tasks given so far */
    uint32_t *quota;           /* n_members: the most tasks it keeps */
    double *task_load;         /* n_tasks: each task's load, or NULL: the group reports no loads */
    double *weight;            /* n_members: load capacity if all have one and there are loads, else capacity */
    double *load;              /* n_members: what it was given so far, in tasks or (with loads) load */
    uint32_t *heap;            /* n_members: scratch for the least-loaded search */
    uint8_t *subscribed;       /* n_members: scratch, 1 for the subscribers of the current topic */
} group_t;

/* The topics member m subscribes to (NULL/0 for an invalid set index). */
static plugin_list_u32_t topics_of(const group_t *g, uint32_t m) {
    uint32_t s = g->in->members.ptr[m].subscription;
    plugin_list_u32_t none = {NULL, 0};
    return s < g->in->subscriptions.len ? g->in->subscriptions.ptr[s] : none;
}

static void group_free(group_t *g) {
    free(g->first_task);
    free(g->sub_start);
    free(g->sub_member);
    free(g->topic_capacity);
    free(g->capacity);
    free(g->count);
    free(g->quota);
    free(g->task_load);
    free(g->weight);
    free(g->load);
    free(g->heap);
    free(g->subscribed);
}

/* The tasks' loads, when the group reports any (else task_load stays NULL
 * and everything counts tasks), and the members' weights; false when out
 * of memory. */
static bool loads_init(group_t *g) {
    const group_input_t *in = g->in;
    bool by_load = in->load_unit.is_some && in->loads.task.len > 0 && g->n_tasks > 0;
    if (by_load) {
        g->task_load = malloc(g->n_tasks * sizeof(double));
        if (!g->task_load)
            return false;
        for (size_t t = 0; t < g->n_tasks; t++)
            g->task_load[t] = NAN; /* unknown */
        for (size_t i = 0; i < in->loads.task.len && i < in->loads.load.len; i++)
            if (in->loads.task.ptr[i] < g->n_tasks)
                g->task_load[in->loads.task.ptr[i]] = in->loads.load.ptr[i];
        double known = 0.0, sum = 0.0;
        for (size_t t = 0; t < g->n_tasks; t++)
            if (!isnan(g->task_load[t])) {
                known++;
                sum += g->task_load[t];
            }
        for (size_t t = 0; t < g->n_tasks; t++)
            if (isnan(g->task_load[t]))
                g->task_load[t] = sum / known; /* unknown is not zero: the mean of the known */
        if (known == 0.0) { /* no row named a task of the input: count tasks */
            free(g->task_load);
            g->task_load = NULL;
        }
    }
    bool all_declare = g->task_load != NULL;
    for (size_t m = 0; m < g->n_members; m++) {
        const plugin_option_f64_t *c = &in->members.ptr[m].load_capacity;
        all_declare = all_declare && c->is_some && c->val > 0.0;
    }
    for (size_t m = 0; m < g->n_members; m++)
        g->weight[m] = all_declare ? in->members.ptr[m].load_capacity.val : (double)g->capacity[m];
    return true;
}

/* What task `task` weighs: its load, or 1 when the group reports none. */
static double cost(const group_t *g, uint32_t task) { return g->task_load ? g->task_load[task] : 1.0; }

/* Builds the index; false when out of memory. */
static bool group_init(group_t *g, const group_input_t *in) {
    memset(g, 0, sizeof *g);
    g->in = in;
    g->n_topics = in->topics.len;
    g->n_members = in->members.len;
    g->n_tasks = in->active_owner.len;

    size_t n_sub = 0; /* (member, topic) subscription pairs */
    for (uint32_t m = 0; m < g->n_members; m++)
        n_sub += topics_of(g, m).len;

    g->first_task = calloc(g->n_topics + 1, sizeof(uint32_t));
    g->sub_start = calloc(g->n_topics + 1, sizeof(uint32_t));
    g->sub_member = malloc((n_sub ? n_sub : 1) * sizeof(uint32_t));
    g->topic_capacity = calloc(g->n_topics ? g->n_topics : 1, sizeof(uint64_t));
    g->capacity = malloc((g->n_members ? g->n_members : 1) * sizeof(uint32_t));
    g->count = calloc(g->n_members ? g->n_members : 1, sizeof(uint32_t));
    g->quota = calloc(g->n_members ? g->n_members : 1, sizeof(uint32_t));
    g->weight = malloc((g->n_members ? g->n_members : 1) * sizeof(double));
    g->load = calloc(g->n_members ? g->n_members : 1, sizeof(double));
    g->heap = malloc((g->n_members ? g->n_members : 1) * sizeof(uint32_t));
    g->subscribed = calloc(g->n_members ? g->n_members : 1, 1);
    if (!g->first_task || !g->sub_start || !g->sub_member || !g->topic_capacity || !g->capacity || !g->count ||
        !g->quota || !g->weight || !g->load || !g->heap || !g->subscribed)
        return false;

    for (size_t m = 0; m < g->n_members; m++) /* the host guarantees >= 1; stay safe anyway */
        g->capacity[m] = in->members.ptr[m].capacity ? in->members.ptr[m].capacity : 1;
    if (!loads_init(g))
        return false;

    uint64_t total = 0;
    for (size_t t = 0; t < g->n_topics; t++) {
        total += in->topics.ptr[t].partitions;
        g->first_task[t + 1] = (uint32_t)total;
    }
    g->n_topic_tasks = total;

    /* Subscribers per topic, in member order (counting sort). */
    for (uint32_t m = 0; m < g->n_members; m++) {
        plugin_list_u32_t topics = topics_of(g, m);
        for (size_t i = 0; i < topics.len; i++)
            if (topics.ptr[i] < g->n_topics) {
                g->sub_start[topics.ptr[i] + 1]++;
                g->topic_capacity[topics.ptr[i]] += g->capacity[m];
            }
    }
    for (size_t t = 0; t < g->n_topics; t++)
        g->sub_start[t + 1] += g->sub_start[t];
    uint32_t *cursor = malloc((g->n_topics ? g->n_topics : 1) * sizeof(uint32_t)); /* next free slot per topic */
    if (!cursor)
        return false;
    memcpy(cursor, g->sub_start, g->n_topics * sizeof(uint32_t));
    for (uint32_t m = 0; m < g->n_members; m++) {
        plugin_list_u32_t topics = topics_of(g, m);
        for (size_t i = 0; i < topics.len; i++)
            if (topics.ptr[i] < g->n_topics)
                g->sub_member[cursor[topics.ptr[i]]++] = m;
    }
    free(cursor);

    /* Quotas: the member's share of the tasks of each of its topics. */
    for (uint32_t m = 0; m < g->n_members; m++) {
        plugin_list_u32_t topics = topics_of(g, m);
        uint64_t tasks = 0, subscriber_capacity = 0;
        bool uniform = true; /* all its topics have the same subscribers' capacity */
        double share = 0.0;
        for (size_t i = 0; i < topics.len; i++) {
            uint32_t t = topics.ptr[i];
            if (t >= g->n_topics)
                continue;
            uint32_t partitions = in->topics.ptr[t].partitions;
            if (subscriber_capacity == 0)
                subscriber_capacity = g->topic_capacity[t];
            uniform = uniform && g->topic_capacity[t] == subscriber_capacity;
            tasks += partitions;
            share += (double)partitions / (double)g->topic_capacity[t];
        }
        uint64_t c = g->capacity[m];
        if (tasks == 0)
            g->quota[m] = 0;
        else if (uniform) /* exact: ceil(tasks * c / subscriber_capacity) */
            g->quota[m] = (uint32_t)((tasks * c + subscriber_capacity - 1) / subscriber_capacity);
        else /* mixed subscriptions: the sum of the per-topic shares */
            g->quota[m] = (uint32_t)ceil(share * (double)c);
    }
    return true;
}

/* Whether member a is less loaded than member b: load/weight compared by
 * cross multiplication (exact for task counts), ties to the lower index. */
static bool lighter(const group_t *g, uint32_t a, uint32_t b) {
    double la = g->load[a] * g->weight[b];
    double lb = g->load[b] * g->weight[a];
    return la < lb || (la == lb && a < b);
}

static void sift_down(const group_t *g, uint32_t *heap, size_t n, size_t i) {
    for (;;) {
        size_t least = i, left = 2 * i + 1, right = left + 1;
        if (left < n && lighter(g, heap[left], heap[least]))
            least = left;
        if (right < n && lighter(g, heap[right], heap[least]))
            least = right;
        if (least == i)
            return;
        uint32_t tmp = heap[i];
        heap[i] = heap[least];
        heap[least] = tmp;
        i = least;
    }
}

bool exports_assignd_assignor_assignor_assign(exports_assignd_assignor_assignor_group_input_t *input,
                                              exports_assignd_assignor_assignor_assignment_t *ret,
                                              exports_assignd_assignor_assignor_assign_error_t *err) {
    text_t msg = {.len = 0};
    group_t g;
    bool ok = false;

    bool sticky = true;
    const plugin_string_t *value = param(input, "sticky");
    if (value && !string_is(value, "true") && !string_is(value, "false")) {
        text_str(&msg, "sticky: expected true or false, got \"");
        text_bytes(&msg, value->ptr, value->len);
        text_str(&msg, "\"");
        fail(err, ASSIGND_ASSIGNOR_TYPES_ASSIGN_ERROR_INVALID_PARAM, &msg);
        goto out_input;
    }
    if (value)
        sticky = string_is(value, "true");

    if (!group_init(&g, input)) {
        text_str(&msg, "out of memory");
        fail(err, ASSIGND_ASSIGNOR_TYPES_ASSIGN_ERROR_FAILED, &msg);
        goto out;
    }
    if (g.n_topic_tasks != g.n_tasks) {
        text_str(&msg, "active-owner has ");
        text_u64(&msg, g.n_tasks);
        text_str(&msg, " entries but the topics have ");
        text_u64(&msg, g.n_topic_tasks);
        text_str(&msg, " tasks");
        fail(err, ASSIGND_ASSIGNOR_TYPES_ASSIGN_ERROR_UNSUPPORTED_INPUT, &msg);
        goto out;
    }

    /* We own the input: its active-owner column becomes the answer, in
     * place (each task's old owner is read before it is overwritten). */
    uint32_t *owner = input->active_owner.ptr;
    size_t kept = 0, placed = 0, orphaned = 0;

    /* 1. Keep what may stay. */
    for (size_t t = 0; t < g.n_topics; t++) {
        for (uint32_t i = g.sub_start[t]; i < g.sub_start[t + 1]; i++)
            g.subscribed[g.sub_member[i]] = 1;
        for (uint32_t task = g.first_task[t]; task < g.first_task[t + 1]; task++) {
            uint32_t o = owner[task];
            if (sticky && o < g.n_members && g.subscribed[o] && g.count[o] < g.quota[o]) {
                g.count[o]++;
                g.load[o] += cost(&g, task);
                kept++;
            } else {
                owner[task] = NO_MEMBER;
            }
        }
        for (uint32_t i = g.sub_start[t]; i < g.sub_start[t + 1]; i++)
            g.subscribed[g.sub_member[i]] = 0;
    }

    /* 2. Everything else to the least-loaded subscriber: a min-heap of the
     *    topic's subscribers; loads only grow (a load is never negative),
     *    so sifting the root down after each task keeps it valid. */
    for (size_t t = 0; t < g.n_topics; t++) {
        size_t n = g.sub_start[t + 1] - g.sub_start[t];
        bool heap_ready = false;
        for (uint32_t task = g.first_task[t]; task < g.first_task[t + 1]; task++) {
            if (owner[task] != NO_MEMBER)
                continue;
            if (n == 0) {
                orphaned++;
                continue;
            }
            if (!heap_ready) {
                memcpy(g.heap, g.sub_member + g.sub_start[t], n * sizeof(uint32_t));
                for (size_t i = n / 2; i-- > 0;)
                    sift_down(&g, g.heap, n, i);
                heap_ready = true;
            }
            uint32_t m = g.heap[0];
            owner[task] = m;
            g.count[m]++;
            g.load[m] += cost(&g, task);
            placed++;
            sift_down(&g, g.heap, n, 0);
        }
    }

    /* Hand the column over to the answer (the post-return frees it). */
    ret->active_owner = input->active_owner;
    input->active_owner.ptr = NULL;
    input->active_owner.len = 0;
    memset(&ret->learners, 0, sizeof ret->learners);
    memset(&ret->standbys, 0, sizeof ret->standbys);
    ok = true;

    text_str(&msg, "c-sticky: ");
    text_u64(&msg, g.n_tasks);
    text_str(&msg, " tasks, ");
    text_u64(&msg, g.n_members);
    text_str(&msg, " members: kept ");
    text_u64(&msg, kept);
    text_str(&msg, ", placed ");
    text_u64(&msg, placed);
    text_str(&msg, ", ");
    text_u64(&msg, orphaned);
    text_str(&msg, " without a subscriber");
    text_str(&msg, g.task_load ? ", placed by load" : "");
    text_str(&msg, sticky ? "" : " (sticky=false)");
    log_text(ASSIGND_ASSIGNOR_LOG_LEVEL_INFO, &msg);

out:
    group_free(&g);
out_input:
    if (!ok) /* the message is also the error the operator sees */
        log_text(ASSIGND_ASSIGNOR_LOG_LEVEL_WARN, &msg);
    exports_assignd_assignor_assignor_group_input_free(input);
    return ok;
}
