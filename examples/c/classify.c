/*
 * Example: load a rule file, classify a trace, print the matches.
 *
 *   cc -O2 -I include examples/c/classify.c -L target/release -lrqvs -o classify
 *   LD_LIBRARY_PATH=target/release ./classify RULES TRACE [KIND]
 *
 * RULES: ClassBench rules or ovs-ofctl flows (plain or .xz); TRACE: a ClassBench trace or a
 * pcap/pcapng capture; KIND: ref, tss, tm, ofproto, nmu (default), nmu-isets, nmu-bs.
 */
#include <stdio.h>
#include <stdlib.h>

#include "rqvs.h"

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s RULES TRACE [KIND]\n", argv[0]);
        return 2;
    }
    rqvs_error *err = NULL;
    rqvs_classifier *c = rqvs_classifier_from_file(argv[1], argc > 3 ? argv[3] : "nmu", &err);
    if (!c) {
        fprintf(stderr, "error: %s\n", rqvs_error_message(err));
        rqvs_error_free(err);
        return 1;
    }
    rqvs_key *keys;
    size_t n;
    if (rqvs_trace_read(argv[2], 1, &keys, &n, &err) != RQVS_OK) {
        fprintf(stderr, "error: %s\n", rqvs_error_message(err));
        rqvs_error_free(err);
        rqvs_classifier_free(c);
        return 1;
    }
    int64_t *ids = malloc(n * sizeof *ids);
    int rc = rqvs_classify_batch(c, keys, n, ids);
    if (rc != RQVS_OK) {
        fprintf(stderr, "error: %s\n", rqvs_status_str(rc));
        return 1;
    }
    size_t matched = 0;
    for (size_t i = 0; i < n; i++) {
        matched += ids[i] != RQVS_NO_MATCH;
        if (i < 10)
            printf("packet %zu: %u.%u.%u.%u -> %u.%u.%u.%u proto %u ports %u -> %u: rule %lld\n", i,
                   keys[i].nw_src >> 24, (keys[i].nw_src >> 16) & 255, (keys[i].nw_src >> 8) & 255,
                   keys[i].nw_src & 255, keys[i].nw_dst >> 24, (keys[i].nw_dst >> 16) & 255,
                   (keys[i].nw_dst >> 8) & 255, keys[i].nw_dst & 255, keys[i].nw_proto, keys[i].tp_src,
                   keys[i].tp_dst, (long long)ids[i]);
    }
    printf("%s: %zu rules, %zu packets, %zu matched\n", rqvs_classifier_kind(c), rqvs_classifier_len(c), n, matched);
    free(ids);
    rqvs_keys_free(keys, n);
    rqvs_classifier_free(c);
    return 0;
}
