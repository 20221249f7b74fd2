/*
 * The C test suite of librqvs, run under AddressSanitizer with leak detection by
 * crates/capi/tests/c_suite.rs (which builds it with the system cc and passes the data).
 *
 *   test_rqvs WORK_DIR DATA_DIR SET...
 *
 * SET is a ClassBench set name (acl1_1k), or NAME@N to classify a sample of about N packets of
 * its trace (every k-th). DATA_DIR holds rules/NAME.xz and traces/NAME_trace.xz; WORK_DIR holds
 * NAME.rules, the same rules uncompressed (their lines are re-inserted as text), and receives
 * temporary files.
 *
 * For every set: every kind gives the reference's rule ids on every packet; then 10% of the
 * rules are removed through the API and every kind is checked again; then they are inserted
 * back (half as ClassBench text, half in struct form) and checked again, also against the
 * original winners. The live NuevoMatchUP is checked the same way (with lookups from two
 * threads while the main thread updates), and its saved model reloaded. Then bad input:
 * wrong paths, malformed rules, NULL handles — error codes and messages, never a crash.
 *
 * Lines "message NAME: TEXT" give error messages the driver compares with the rqvs command's.
 * The last line is "N passed, M failed"; the exit status is 0 only when nothing failed.
 */
#define _POSIX_C_SOURCE 199309L
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "rqvs.h"

static int passed, failed;

#define CHECK(cond, ...)                                   \
    do {                                                   \
        if (cond) {                                        \
            passed++;                                      \
        } else {                                           \
            failed++;                                      \
            printf("FAIL %s:%d: ", __FILE__, __LINE__);    \
            printf(__VA_ARGS__);                           \
            printf("\n");                                  \
        }                                                  \
    } while (0)

/* Prints how long the phase that ends now took (diagnostics: the suite's slow parts). */
static void phase(const char *set, const char *what);
static void phase_time(const char *set, const char *what) { phase(set, what); }
static void phase(const char *set, const char *what) {
    static struct timespec last;
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    if (what) printf("time %s %s: %.2f s\n", set, what, (double)(now.tv_sec - last.tv_sec) + (double)(now.tv_nsec - last.tv_nsec) * 1e-9);
    fflush(stdout);
    last = now;
}

static const char *KINDS[] = {"tss", "tm", "ofproto", "nmu", "nmu-isets", "nmu-bs"};
#define NKINDS (sizeof KINDS / sizeof KINDS[0])

/* The kinds a classifier is checked against the reference with, plus the live one. */
typedef struct {
    rqvs_classifier *c[NKINDS + 1]; /* [0] = ref */
    rqvs_live *live;
} handles;

static char *read_lines(const char *path, char ***lines, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *text = malloc((size_t)len + 1);
    size_t got = fread(text, 1, (size_t)len, f);
    fclose(f);
    text[got] = 0;
    size_t cap = 1024;
    *lines = malloc(cap * sizeof **lines);
    *n = 0;
    for (char *s = strtok(text, "\n"); s; s = strtok(NULL, "\n")) {
        if (*n == cap) *lines = realloc(*lines, (cap *= 2) * sizeof **lines);
        (*lines)[(*n)++] = s;
    }
    return text;
}

/* Classifies `keys` with every handle; counts packets where a kind differs from the reference. */
static void compare_all(const char *set, const char *phase, handles *h, const rqvs_key *keys, size_t n,
                        int64_t *want, int64_t *got) {
    CHECK(rqvs_classify_batch(h->c[0], keys, n, want) == RQVS_OK, "%s %s: ref classify", set, phase);
    phase_time(set, "ref");
    for (size_t k = 1; k <= NKINDS; k++) {
        CHECK(rqvs_classify_batch(h->c[k], keys, n, got) == RQVS_OK, "%s %s: classify", set, phase);
        phase_time(set, KINDS[k - 1]);
        size_t bad = 0, first = 0;
        for (size_t i = 0; i < n; i++)
            if (got[i] != want[i] && bad++ == 0) first = i;
        CHECK(bad == 0, "%s %s: %s differs from ref on %zu of %zu packets (first: packet %zu, %lld vs %lld)", set,
              phase, KINDS[k - 1], bad, n, first, bad ? (long long)got[first] : 0LL,
              bad ? (long long)want[first] : 0LL);
        CHECK(rqvs_classifier_len(h->c[k]) == rqvs_classifier_len(h->c[0]), "%s %s: %s len", set, phase,
              KINDS[k - 1]);
    }
    CHECK(rqvs_live_classify_batch(h->live, keys, n, got) == RQVS_OK, "%s %s: live classify", set, phase);
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) bad += got[i] != want[i];
    CHECK(bad == 0, "%s %s: live differs from ref on %zu of %zu packets", set, phase, bad, n);
    CHECK(rqvs_live_len(h->live) == rqvs_classifier_len(h->c[0]), "%s %s: live len", set, phase);
}

/* Lookups from another thread while the main thread updates the live classifier. */
typedef struct {
    rqvs_live *live;
    const rqvs_key *keys;
    size_t n;
    volatile int stop;
    long batches, errors, bad_ids;
    int64_t max_id;
} reader;

static void *read_loop(void *arg) {
    reader *r = arg;
    int64_t ids[256];
    size_t at = 0;
    while (!r->stop) {
        size_t len = r->n - at < 256 ? r->n - at : 256;
        if (rqvs_live_classify_batch(r->live, r->keys + at, len, ids) != RQVS_OK) r->errors++;
        for (size_t i = 0; i < len; i++)
            if (ids[i] < -1 || ids[i] > r->max_id) r->bad_ids++;
        r->batches++;
        at = (at + len) % r->n;
        /* A pause between batches: two readers spinning on a 2-core machine would leave the
         * updating thread a fraction of a core (and the suite most of CI's time). */
        nanosleep(&(struct timespec){.tv_nsec = 200000}, NULL);
    }
    return NULL;
}

static void differential(const char *work, const char *data, const char *arg) {
    char set[64], path[1024], trace[1024];
    size_t sample = 0;
    snprintf(set, sizeof set, "%s", arg);
    char *at = strchr(set, '@');
    if (at) {
        *at = 0;
        sample = strtoul(at + 1, NULL, 10);
    }
    snprintf(path, sizeof path, "%s/rules/%s.xz", data, set);
    snprintf(trace, sizeof trace, "%s/traces/%s_trace.xz", data, set);

    rqvs_error *err = NULL;
    rqvs_key *all = NULL;
    size_t n_all = 0;
    int rc = rqvs_trace_read(trace, 1, &all, &n_all, &err);
    CHECK(rc == RQVS_OK && n_all > 0, "%s: trace: %s", set, rqvs_error_message(err));
    rqvs_error_free(err);
    if (rc != RQVS_OK) return;
    /* A sample: every k-th packet. */
    size_t stride = sample && n_all > sample ? n_all / sample : 1, n = 0;
    rqvs_key *keys = malloc((n_all / stride + 1) * sizeof *keys);
    for (size_t i = 0; i < n_all; i += stride) keys[n++] = all[i];
    rqvs_keys_free(all, n_all);

    handles h;
    phase(set, NULL);
    h.c[0] = rqvs_classifier_from_file(path, "ref", &err);
    CHECK(h.c[0] != NULL && err == NULL, "%s: ref: %s", set, rqvs_error_message(err));
    for (size_t k = 1; k <= NKINDS; k++) {
        h.c[k] = rqvs_classifier_from_file(path, KINDS[k - 1], &err);
        CHECK(h.c[k] != NULL, "%s: %s: %s", set, KINDS[k - 1], rqvs_error_message(err));
        rqvs_error_free(err);
        phase(set, KINDS[k - 1]);
    }
    /* Sets alternate the policies; under the delayed one, the re-inserted rules are staged and
     * models are trained and swapped in while the readers run. */
    static int sets;
    uint32_t policy = sets++ % 2 ? RQVS_POLICY_DELAYED : RQVS_POLICY_INSTANT;
    h.live = rqvs_live_from_file(path, policy, 0.1, &err);
    CHECK(h.live != NULL, "%s: live: %s", set, rqvs_error_message(err));
    rqvs_error_free(err);
    for (size_t k = 0; k <= NKINDS; k++)
        if (!h.c[k]) return;
    if (!h.live) return;

    int64_t *want = malloc(n * sizeof *want), *got = malloc(n * sizeof *got), *orig = malloc(n * sizeof *orig);
    phase(set, "live");
    compare_all(set, "built", &h, keys, n, orig, got);
    phase(set, "compare");
    size_t rules = rqvs_classifier_len(h.c[0]);

    /* The rule lines, to insert them back as text. */
    char **lines;
    size_t n_lines;
    snprintf(path, sizeof path, "%s/%s.rules", work, set);
    char *text = read_lines(path, &lines, &n_lines);
    CHECK(text && n_lines == rules, "%s: %s has %zu lines for %zu rules", set, path, text ? n_lines : 0, rules);
    if (!text) return;

    /* Remove 10% (ids 3, 13, 23, ...) from every handle, keeping the struct form. */
    uint32_t every = 10;
    size_t n_removed = 0;
    uint32_t *removed_ids = malloc((rules / every + 1) * sizeof *removed_ids);
    rqvs_rule *removed = malloc((rules / every + 1) * sizeof *removed);
    reader rd[2];
    pthread_t th[2];
    for (int t = 0; t < 2; t++) {
        rd[t] = (reader){.live = h.live, .keys = keys, .n = n, .max_id = (int64_t)(2 * rules)};
        pthread_create(&th[t], NULL, read_loop, &rd[t]);
    }
    for (uint32_t id = 3; id < rules; id += every) {
        rqvs_rule r;
        CHECK(rqvs_classifier_remove(h.c[0], id, &r, &err) == RQVS_OK, "%s: remove %u from ref: %s", set, id,
              rqvs_error_message(err));
        rqvs_error_free(err);
        for (size_t k = 1; k <= NKINDS; k++) {
            rqvs_rule rk;
            CHECK(rqvs_classifier_remove(h.c[k], id, &rk, NULL) == RQVS_OK, "%s: remove %u from %s", set, id,
                  KINDS[k - 1]);
        }
        CHECK(rqvs_live_remove(h.live, id, NULL, NULL) == RQVS_OK, "%s: remove %u from live", set, id);
        removed_ids[n_removed] = id;
        removed[n_removed++] = r;
    }
    phase(set, "remove");
    compare_all(set, "after removing rules", &h, keys, n, want, got);
    phase(set, "compare");

    /* Insert them back, even ones as ClassBench text (priority n - line), odd ones as structs. The
     * new ids are the same in every handle. */
    int64_t *new_id = malloc(rules * sizeof *new_id);
    for (size_t i = 0; i < rules; i++) new_id[i] = (int64_t)i;
    for (size_t j = 0; j < n_removed; j++) {
        uint32_t id = removed_ids[j];
        int64_t ids[NKINDS + 2];
        if (j % 2 == 0) {
            uint32_t prio = (uint32_t)(rules - id);
            for (size_t k = 0; k <= NKINDS; k++) ids[k] = rqvs_classifier_insert_text(h.c[k], lines[id], prio, NULL);
            ids[NKINDS + 1] = rqvs_live_insert_text(h.live, lines[id], prio, &err);
        } else {
            for (size_t k = 0; k <= NKINDS; k++) ids[k] = rqvs_classifier_insert_rule(h.c[k], &removed[j], NULL);
            ids[NKINDS + 1] = rqvs_live_insert_rule(h.live, &removed[j], &err);
        }
        CHECK(ids[0] == (int64_t)(rules + j), "%s: re-insert of %u got id %lld, expected %zu: %s", set, id,
              (long long)ids[0], rules + j, rqvs_error_message(err));
        rqvs_error_free(err);
        for (size_t k = 1; k <= NKINDS + 1; k++)
            CHECK(ids[k] == ids[0], "%s: re-insert into handle %zu: id %lld", set, k, (long long)ids[k]);
        new_id[id] = ids[0];
    }
    phase(set, "insert");
    for (int t = 0; t < 2; t++) {
        rd[t].stop = 1;
        pthread_join(th[t], NULL);
        CHECK(rd[t].batches > 0 && rd[t].errors == 0 && rd[t].bad_ids == 0,
              "%s: reader %d: %ld batches, %ld errors, %ld bad ids", set, t, rd[t].batches, rd[t].errors,
              rd[t].bad_ids);
    }
    /* Until every staged rule is in a model (each session trains on the rules staged when it
     * started). */
    rqvs_live_stats st;
    for (int round = 0; round < 100; round++) {
        CHECK(rqvs_live_finish_training(h.live) == RQVS_OK && rqvs_live_poll(h.live) == RQVS_OK,
              "%s: finish training", set);
        CHECK(rqvs_live_get_stats(h.live, &st) == RQVS_OK, "%s: stats", set);
        if (st.staged == 0 && !st.training) break;
    }
    CHECK(st.staged == 0, "%s: %zu rules still staged", set, st.staged);
    phase(set, "train");
    compare_all(set, "after inserting them back", &h, keys, n, want, got);
    phase(set, "compare");
    size_t moved = 0;
    for (size_t i = 0; i < n; i++) moved += want[i] != (orig[i] < 0 ? -1 : new_id[orig[i]]);
    CHECK(moved == 0, "%s: %zu packets changed winner after removing and re-inserting the same rules", set, moved);

    /* Save the live model; load it as a classifier and as a live handle. */
    snprintf(path, sizeof path, "%s/%s.nmu", work, set);
    CHECK(rqvs_live_save_model(h.live, path, &err) == RQVS_OK, "%s: save: %s", set, rqvs_error_message(err));
    rqvs_error_free(err);
    rqvs_classifier *loaded = rqvs_classifier_load_model(path, &err);
    rqvs_live *loaded_live = rqvs_live_load_model(path, RQVS_POLICY_DELAYED, 0.1, NULL);
    CHECK(loaded && loaded_live, "%s: load: %s", set, rqvs_error_message(err));
    rqvs_error_free(err);
    if (loaded && loaded_live) {
        size_t bad = 0;
        rqvs_classify_batch(loaded, keys, n, got);
        for (size_t i = 0; i < n; i++) bad += got[i] != want[i];
        rqvs_live_classify_batch(loaded_live, keys, n, got);
        for (size_t i = 0; i < n; i++) bad += got[i] != want[i];
        CHECK(bad == 0, "%s: the loaded model differs on %zu packets", set, bad);
        CHECK(rqvs_classifier_len(loaded) == rules && rqvs_live_len(loaded_live) == rules, "%s: loaded len", set);
    }
    rqvs_classifier_free(loaded);
    rqvs_live_free(loaded_live);
    remove(path);

    CHECK(rqvs_live_get_stats(h.live, &st) == RQVS_OK && st.rules == rules && st.coverage > 0.0 && st.coverage <= 1.0,
          "%s: live stats", set);
    printf("ok %s: %zu packets, %zu rules, %zu removed and re-inserted; ref and %zu kinds and live agree "
           "(live, %s policy: coverage %.3f, %zu training sessions)\n",
           arg, n, rules, n_removed, NKINDS, policy == RQVS_POLICY_DELAYED ? "delayed" : "instant", st.coverage,
           st.sessions);
    fflush(stdout);

    for (size_t k = 0; k <= NKINDS; k++) rqvs_classifier_free(h.c[k]);
    rqvs_live_free(h.live);
    free(text);
    free(lines);
    free(keys);
    free(want);
    free(got);
    free(orig);
    free(removed_ids);
    free(removed);
    free(new_id);
}

static void message(const char *name, rqvs_error *err) {
    printf("message %s: %s\n", name, rqvs_error_message(err));
}

/* Field by field: a struct's padding bytes are not part of its value. */
static int same_key(const rqvs_key *a, const rqvs_key *b) {
    return a->nw_src == b->nw_src && a->nw_dst == b->nw_dst && a->tp_src == b->tp_src && a->tp_dst == b->tp_dst &&
           a->in_port == b->in_port && a->dl_type == b->dl_type && a->vlan_tci == b->vlan_tci &&
           a->tcp_flags == b->tcp_flags && a->nw_proto == b->nw_proto && a->nw_tos == b->nw_tos &&
           a->nw_frag == b->nw_frag && memcmp(a->dl_src, b->dl_src, 6) == 0 && memcmp(a->dl_dst, b->dl_dst, 6) == 0;
}

static void write_file(const char *path, const char *text) {
    FILE *f = fopen(path, "wb");
    fputs(text, f);
    fclose(f);
}

static void bad_input(const char *work) {
    rqvs_error *err = NULL;
    char path[1024];

    /* A wrong path. */
    rqvs_classifier *c = rqvs_classifier_from_file("/nonexistent/rules.txt", "tm", &err);
    CHECK(c == NULL && rqvs_error_status(err) == RQVS_ERR_IO, "missing file: status %d", rqvs_error_status(err));
    message("missing_file", err);
    rqvs_error_free(err);

    /* A malformed rule on line 2. */
    snprintf(path, sizeof path, "%s/bad.rules", work);
    write_file(path,
               "@10.0.0.0/8\t0.0.0.0/0\t0 : 65535\t0 : 65535\t0x06/0xFF\t0x0000/0x0000\n"
               "@10.0.0.0/8\t0.0.0.0/0\t0 : 65535\t0 ; 65535\t0x06/0xFF\t0x0000/0x0000\n");
    c = rqvs_classifier_from_file(path, "nmu", &err);
    CHECK(c == NULL && rqvs_error_status(err) == RQVS_ERR_PARSE, "malformed file: status %d",
          rqvs_error_status(err));
    message("malformed_file", err);
    rqvs_error_free(err);
    rqvs_live *live = rqvs_live_from_file(path, RQVS_POLICY_INSTANT, 0.1, &err);
    CHECK(live == NULL && rqvs_error_status(err) == RQVS_ERR_PARSE, "malformed file (live)");
    message("malformed_file_live", err);
    rqvs_error_free(err);

    /* An unknown kind, policy, threshold. */
    c = rqvs_classifier_from_text("tcp,actions=drop\n", "text", "bogus", &err);
    CHECK(c == NULL && rqvs_error_status(err) == RQVS_ERR_INVALID, "unknown kind");
    message("unknown_kind", err);
    rqvs_error_free(err);
    live = rqvs_live_from_rules(NULL, 0, 7, 0.1, &err);
    CHECK(live == NULL && rqvs_error_status(err) == RQVS_ERR_INVALID, "unknown policy");
    rqvs_error_free(err);
    live = rqvs_live_from_rules(NULL, 0, RQVS_POLICY_INSTANT, 2.0, &err);
    CHECK(live == NULL && rqvs_error_status(err) == RQVS_ERR_INVALID, "threshold 2.0");
    rqvs_error_free(err);

    /* ovs-ofctl text: a classifier, inserts with their own priority, a malformed insert. */
    c = rqvs_classifier_from_text("priority=10,tcp,tp_dst=80,actions=drop\npriority=5,ip,actions=drop\n", "flows",
                                  "ofproto", &err);
    CHECK(c != NULL && err == NULL && rqvs_classifier_len(c) == 2, "ofctl text: %s", rqvs_error_message(err));
    CHECK(c && strcmp(rqvs_classifier_kind(c), "ofproto") == 0, "kind name");
    rqvs_key k[2];
    memset(k, 0, sizeof k);
    k[0].dl_type = k[1].dl_type = RQVS_ETH_TYPE_IP;
    k[0].nw_proto = k[1].nw_proto = 6;
    k[0].tp_dst = 80;
    k[1].tp_dst = 22;
    int64_t ids[2];
    CHECK(rqvs_classify_batch(c, k, 2, ids) == RQVS_OK && ids[0] == 0 && ids[1] == 1, "ofctl classify");
    int64_t id = rqvs_classifier_insert_text(c, "priority=20,tcp,tp_dst=22,actions=drop", 0, &err);
    CHECK(id == 2 && err == NULL, "ofctl insert: %lld", (long long)id);
    CHECK(rqvs_classify_batch(c, k, 2, ids) == RQVS_OK && ids[0] == 0 && ids[1] == 2, "after ofctl insert");
    id = rqvs_classifier_insert_text(c, "priority=20,tcp,tp_dst=99999,actions=drop", 0, &err);
    CHECK(id == -1 && rqvs_error_status(err) == RQVS_ERR_PARSE, "malformed insert: %lld", (long long)id);
    message("malformed_insert", err);
    rqvs_error_free(err);
    id = rqvs_classifier_insert_text(c, "@1.2.3.4/40\t0.0.0.0/0\t0 : 65535\t0 : 65535\t0x06/0xFF", 1, &err);
    CHECK(id == -1 && rqvs_error_status(err) == RQVS_ERR_PARSE, "malformed ClassBench insert");
    message("malformed_classbench_insert", err);
    rqvs_error_free(err);
    CHECK(rqvs_classifier_insert_text(c, "udp,actions=drop", 0, NULL) == 3, "a failed insert uses up no id");
    CHECK(rqvs_classifier_remove(c, 77, NULL, &err) == RQVS_ERR_NOT_FOUND && rqvs_error_status(err) ==
          RQVS_ERR_NOT_FOUND, "remove of an absent id");
    message("remove_absent", err);
    rqvs_error_free(err);
    snprintf(path, sizeof path, "%s/ofproto.nmu", work);
    CHECK(rqvs_classifier_save_model(c, path, &err) == RQVS_ERR_INVALID, "save of a kind without a model");
    message("save_without_model", err);
    rqvs_error_free(err);
    rqvs_classifier_free(c);

    /* Struct form: a rule with value bits outside its mask; an empty port range; a good set. */
    rqvs_rule r[3];
    r[0] = rqvs_rule_any(1);
    r[1] = rqvs_rule_any(9);
    r[1].value.nw_proto = 17;
    r[1].mask.nw_proto = 0xff;
    r[1].value.dl_type = RQVS_ETH_TYPE_IP;
    r[1].mask.dl_type = 0xffff;
    r[1].tp_dst_lo = 53;
    r[1].tp_dst_hi = 53;
    r[2] = r[1];
    r[2].value.nw_src = 1; /* mask clear */
    c = rqvs_classifier_from_rules(r, 3, "tm", &err);
    CHECK(c == NULL && rqvs_error_status(err) == RQVS_ERR_INVALID, "value outside mask");
    message("value_outside_mask", err);
    rqvs_error_free(err);
    r[2] = r[1];
    r[2].tp_src_lo = 9;
    r[2].tp_src_hi = 8;
    CHECK(rqvs_classifier_from_rules(r, 3, "tm", &err) == NULL && rqvs_error_status(err) == RQVS_ERR_INVALID,
          "empty port range");
    rqvs_error_free(err);
    c = rqvs_classifier_from_rules(r, 2, "tss", &err);
    CHECK(c && err == NULL, "struct rules: %s", rqvs_error_message(err));
    k[0].nw_proto = 17;
    k[0].tp_dst = 53;
    CHECK(rqvs_classify_batch(c, k, 2, ids) == RQVS_OK && ids[0] == 1 && ids[1] == 0, "struct classify %lld %lld",
          (long long)ids[0], (long long)ids[1]);
    rqvs_rule back;
    CHECK(rqvs_classifier_remove(c, 1, &back, NULL) == RQVS_OK && same_key(&back.value, &r[1].value) &&
          same_key(&back.mask, &r[1].mask) && back.priority == 9 && back.tp_dst_lo == 53 && back.tp_dst_hi == 53 &&
          back.tp_src_lo == 0 && back.tp_src_hi == 65535, "removed rule in struct form");
    CHECK(rqvs_classifier_insert_rule(c, &back, NULL) == 2, "struct re-insert");
    rqvs_classifier_free(c);
    c = rqvs_classifier_from_rules(NULL, 0, "nmu", &err);
    CHECK(c && rqvs_classifier_len(c) == 0 && rqvs_classify_batch(c, k, 2, ids) == RQVS_OK && ids[0] == -1,
          "empty classifier");
    rqvs_classifier_free(c);

    /* Model files: missing, corrupt. */
    c = rqvs_classifier_load_model("/nonexistent/model.nmu", &err);
    CHECK(c == NULL && rqvs_error_status(err) == RQVS_ERR_IO, "missing model");
    rqvs_error_free(err);
    snprintf(path, sizeof path, "%s/corrupt.nmu", work);
    write_file(path, "RQVSNMU");
    c = rqvs_classifier_load_model(path, &err);
    CHECK(c == NULL && rqvs_error_status(err) == RQVS_ERR_MODEL, "corrupt model: %d", rqvs_error_status(err));
    message("corrupt_model", err);
    rqvs_error_free(err);
    live = rqvs_live_load_model(path, RQVS_POLICY_INSTANT, 0.1, &err);
    CHECK(live == NULL && rqvs_error_status(err) == RQVS_ERR_MODEL, "corrupt model (live)");
    rqvs_error_free(err);

    /* Traces: missing, malformed. */
    rqvs_key *keys = NULL;
    size_t n = 0;
    CHECK(rqvs_trace_read("/nonexistent/trace", 1, &keys, &n, &err) == RQVS_ERR_IO && keys == NULL, "missing trace");
    rqvs_error_free(err);
    snprintf(path, sizeof path, "%s/bad.trace", work);
    write_file(path, "1 2 3 4 6 0 1\n1 2 x 4 6 0 1\n");
    CHECK(rqvs_trace_read(path, 1, &keys, &n, &err) == RQVS_ERR_PARSE, "malformed trace");
    message("malformed_trace", err);
    rqvs_error_free(err);

    /* NULL everywhere: codes, never a crash. */
    CHECK(rqvs_classifier_from_file(NULL, "tm", &err) == NULL && rqvs_error_status(err) == RQVS_ERR_NULL,
          "NULL path");
    message("null_path", err);
    rqvs_error_free(err);
    CHECK(rqvs_classifier_from_file("x", NULL, NULL) == NULL, "NULL kind, NULL err");
    CHECK(rqvs_classify_batch(NULL, k, 2, ids) == RQVS_ERR_NULL, "NULL classifier");
    c = rqvs_classifier_from_text("ip,actions=drop", "t", "tm", NULL);
    CHECK(rqvs_classify_batch(c, NULL, 2, ids) == RQVS_ERR_NULL, "NULL keys");
    CHECK(rqvs_classify_batch(c, k, 2, NULL) == RQVS_ERR_NULL, "NULL ids");
    CHECK(rqvs_classify_batch(c, NULL, 0, NULL) == RQVS_OK, "no keys");
    CHECK(rqvs_classifier_insert_text(c, NULL, 0, &err) == -1 && rqvs_error_status(err) == RQVS_ERR_NULL,
          "NULL rule text");
    rqvs_error_free(err);
    CHECK(rqvs_classifier_insert_rule(c, NULL, NULL) == -1, "NULL rule");
    CHECK(rqvs_classifier_save_model(c, NULL, NULL) == RQVS_ERR_NULL, "NULL model path");
    rqvs_classifier_free(c);
    CHECK(rqvs_classifier_len(NULL) == 0 && rqvs_classifier_kind(NULL) == NULL, "NULL len/kind");
    CHECK(rqvs_classifier_insert_text(NULL, "ip,actions=drop", 0, NULL) == -1, "NULL insert");
    CHECK(rqvs_classifier_insert_rule(NULL, &r[0], NULL) == -1, "NULL insert rule");
    CHECK(rqvs_classifier_remove(NULL, 0, NULL, NULL) == RQVS_ERR_NULL, "NULL remove");
    CHECK(rqvs_classifier_save_model(NULL, "x", NULL) == RQVS_ERR_NULL, "NULL save");
    CHECK(rqvs_classifier_from_rules(NULL, 3, "tm", NULL) == NULL, "NULL rules with n > 0");
    CHECK(rqvs_classifier_load_model(NULL, NULL) == NULL, "NULL model");
    CHECK(rqvs_live_from_file(NULL, 0, 0.1, NULL) == NULL && rqvs_live_load_model(NULL, 0, 0.1, NULL) == NULL,
          "NULL live path");
    CHECK(rqvs_live_classify_batch(NULL, k, 2, ids) == RQVS_ERR_NULL && rqvs_live_len(NULL) == 0, "NULL live");
    CHECK(rqvs_live_insert_text(NULL, "ip,actions=drop", 0, NULL) == -1 && rqvs_live_insert_rule(NULL, &r[0], NULL)
          == -1 && rqvs_live_remove(NULL, 0, NULL, NULL) == RQVS_ERR_NULL, "NULL live updates");
    CHECK(rqvs_live_poll(NULL) == RQVS_ERR_NULL && rqvs_live_finish_training(NULL) == RQVS_ERR_NULL &&
          rqvs_live_get_stats(NULL, NULL) == RQVS_ERR_NULL && rqvs_live_save_model(NULL, "x", NULL) == RQVS_ERR_NULL,
          "NULL live poll/stats/save");
    live = rqvs_live_from_rules(r, 2, RQVS_POLICY_DELAYED, 0.1, &err);
    CHECK(live && err == NULL, "live from structs");
    CHECK(rqvs_live_get_stats(live, NULL) == RQVS_ERR_NULL, "NULL stats out");
    CHECK(rqvs_live_insert_rule(live, &r[0], NULL) == 2 && rqvs_live_len(live) == 3, "delayed insert");
    rqvs_live_stats st;
    CHECK(rqvs_live_get_stats(live, &st) == RQVS_OK && st.staged == 1, "staged %zu", st.staged);
    CHECK(rqvs_live_finish_training(live) == RQVS_OK && rqvs_live_get_stats(live, &st) == RQVS_OK && st.staged == 0,
          "staged rule trained in");
    CHECK(rqvs_live_remove(live, 99, NULL, &err) == RQVS_ERR_NOT_FOUND, "live remove absent");
    rqvs_error_free(err);
    rqvs_live_free(live);
    CHECK(rqvs_trace_read("x", 1, NULL, &n, NULL) == RQVS_ERR_NULL, "NULL keys out");
    CHECK(strcmp(rqvs_error_message(NULL), "(NULL rqvs_error)") == 0 && rqvs_error_status(NULL) == RQVS_ERR_NULL,
          "NULL error");
    CHECK(strncmp(rqvs_status_str(RQVS_ERR_NULL), "RQVS_ERR_NULL", 13) == 0 && rqvs_status_str(-5) != NULL,
          "status strings");
    rqvs_classifier_free(NULL);
    rqvs_live_free(NULL);
    rqvs_error_free(NULL);
    rqvs_keys_free(NULL, 0);
    printf("ok bad input\n");
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s WORK_DIR DATA_DIR [SET[@PACKETS]]...\n", argv[0]);
        return 2;
    }
    printf("librqvs %s\n", rqvs_version());
    bad_input(argv[1]);
    for (int i = 3; i < argc; i++) differential(argv[1], argv[2], argv[i]);
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
