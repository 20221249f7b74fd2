/* An LD_PRELOAD shim for tests/switch_faults.rs: it simulates a kernel without an address
 * family. socket(2) of the family in RQVS_LACKS_FAMILY (a number: 44 AF_XDP, 17 AF_PACKET)
 * fails with EAFNOSUPPORT, as on a kernel built without it; every other call goes to the real
 * socket(). The test builds it with `cc -shared -fPIC -o lacks_family.so lacks_family.c -ldl`
 * and runs `rqvs switch` with LD_PRELOAD naming it. Nothing else uses it. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdlib.h>
#include <sys/socket.h>

int socket(int domain, int type, int protocol) {
    static int (*real_socket)(int, int, int);
    const char *lacks = getenv("RQVS_LACKS_FAMILY");
    if (lacks != NULL && *lacks != '\0' && domain == atoi(lacks)) {
        errno = EAFNOSUPPORT;
        return -1;
    }
    if (real_socket == NULL) {
        real_socket = (int (*)(int, int, int))dlsym(RTLD_NEXT, "socket");
        if (real_socket == NULL) {
            errno = ENOSYS;
            return -1;
        }
    }
    return real_socket(domain, type, protocol);
}
