/*
 * Overhead benchmark (not a test): batch classification of a whole trace (the 100K ClassBench
 * traces hold about 1M packets) through the C API, to compare with the rqvs command's Mpps for
 * the same classifier and trace (`rqvs classify --rules RULES --trace TRACE --classifier KIND`).
 *
 *   cc -O2 -I include examples/c/bench.c -L target/release -lrqvs -o bench
 *   LD_LIBRARY_PATH=target/release ./bench RULES TRACE KIND [RUNS]
 *
 * One call of rqvs_classify_batch over every packet per run, timed with CLOCK_MONOTONIC; it
 * prints each run's Mpps and the median.
 */
#define _POSIX_C_SOURCE 199309L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "rqvs.h"

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: %s RULES TRACE KIND [RUNS]\n", argv[0]);
        return 2;
    }
    int runs = argc > 4 ? atoi(argv[4]) : 5;
    if (runs < 1 || runs > 100) runs = 5;
    rqvs_error *err = NULL;
    rqvs_classifier *c = rqvs_classifier_from_file(argv[1], argv[3], &err);
    rqvs_key *keys = NULL;
    size_t n = 0;
    if (!c || rqvs_trace_read(argv[2], 1, &keys, &n, &err) != RQVS_OK) {
        fprintf(stderr, "error: %s\n", rqvs_error_message(err));
        rqvs_error_free(err);
        rqvs_classifier_free(c);
        return 1;
    }
    int64_t *ids = malloc(n * sizeof *ids);
    /* Touched before timing, as the rqvs command's result buffer is (no page faults timed). */
    memset(ids, 0xff, n * sizeof *ids);
    double mpps[100];
    for (int r = 0; r < runs; r++) {
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        int rc = rqvs_classify_batch(c, keys, n, ids);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        if (rc != RQVS_OK) {
            fprintf(stderr, "error: %s\n", rqvs_status_str(rc));
            return 1;
        }
        double s = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
        mpps[r] = (double)n / s / 1e6;
        printf("run %d: %zu packets in %.3f s: %.3f Mpps (%.1f ns/packet)\n", r + 1, n, s, mpps[r], s * 1e9 / (double)n);
    }
    qsort(mpps, (size_t)runs, sizeof mpps[0], cmp);
    printf("%s over %zu rules: median %.3f Mpps through the C API\n", rqvs_classifier_kind(c), rqvs_classifier_len(c),
           mpps[runs / 2]);
    free(ids);
    rqvs_keys_free(keys, n);
    rqvs_classifier_free(c);
    return 0;
}
