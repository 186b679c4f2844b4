/*
 * A storage-fault shim for the compat tests, loaded into the real broker with
 * LD_PRELOAD. It wraps the calls that make file data durable (fsync, fdatasync,
 * sync_file_range) and, when asked, the calls that write it (write, pwrite,
 * pwrite64), and makes them fail with EIO for files under a chosen path, from
 * the moment a trigger file exists. Every other call goes to the real function.
 *
 * Configuration, read once when the library loads:
 *   SLUICE_FAULT_PATH     a substring of the path of the files to fail (as
 *                         /proc/self/fd/<fd> names them). Unset: no faults.
 *   SLUICE_FAULT_TRIGGER  a file whose existence turns the faults on; the test
 *                         creates it at the moment it wants them. Unset: no
 *                         faults, so the shim is inert unless armed. It may
 *                         hold "<count> <arming>": that count then replaces
 *                         SLUICE_FAULT_COUNT, and each new arming number gets
 *                         a fresh budget (an empty trigger is arming 0 with
 *                         the environment's count, for the process's life).
 *   SLUICE_FAULT_OPS      comma-separated: "sync" (the default) and/or "write".
 *   SLUICE_FAULT_COUNT    fail only this many matching calls, then let them all
 *                         through again, as Linux does when it reports a
 *                         writeback error to one fsync and clears it. Unset or
 *                         0: fail every matching call while the trigger exists.
 *   SLUICE_FAULT_LOG      a file that gets one line per injected failure, so a
 *                         test can tell that its fault really happened.
 *
 * The checks in the wrapped calls use only the stack, system calls and strtol
 * (no malloc, no locks), so they are safe from any thread of the broker.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

#define FAULT_TEXT_MAX 4096

static char fault_path[FAULT_TEXT_MAX];
static char fault_trigger[FAULT_TEXT_MAX];
static char fault_log[FAULT_TEXT_MAX];
static int fail_sync;
static int fail_write;
static long fault_count;
/* The arming the calls are counted for (high 32 bits) and how many matching
 * calls it saw (low 32 bits), changed together with one compare-and-swap. */
static unsigned long long arming_calls;
static int configured;

typedef int (*fsync_fn)(int);
typedef int (*sync_file_range_fn)(int, off64_t, off64_t, unsigned int);
typedef ssize_t (*write_fn)(int, const void *, size_t);
typedef ssize_t (*pwrite_fn)(int, const void *, size_t, off_t);
typedef ssize_t (*pwrite64_fn)(int, const void *, size_t, off64_t);

/* Looks the real function up once; a race only repeats the same lookup. */
static void *real(const char *name, void **slot) {
    void *function = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
    if (function == NULL) {
        function = dlsym(RTLD_NEXT, name);
        __atomic_store_n(slot, function, __ATOMIC_RELEASE);
    }
    return function;
}

static void *real_fsync_slot, *real_fdatasync_slot, *real_sync_file_range_slot;
static void *real_write_slot, *real_pwrite_slot, *real_pwrite64_slot;

static ssize_t real_write(int fd, const void *buffer, size_t length) {
    write_fn function = (write_fn)real("write", &real_write_slot);
    if (function == NULL) {
        errno = ENOSYS;
        return -1;
    }
    return function(fd, buffer, length);
}

static void copy_env(const char *name, char *into) {
    const char *value = getenv(name);
    if (value != NULL && strlen(value) < FAULT_TEXT_MAX) {
        strcpy(into, value);
    }
}

__attribute__((constructor)) static void configure(void) {
    copy_env("SLUICE_FAULT_PATH", fault_path);
    copy_env("SLUICE_FAULT_TRIGGER", fault_trigger);
    copy_env("SLUICE_FAULT_LOG", fault_log);
    const char *ops = getenv("SLUICE_FAULT_OPS");
    if (ops == NULL || *ops == '\0') {
        fail_sync = 1;
    } else {
        fail_sync = strstr(ops, "sync") != NULL;
        fail_write = strstr(ops, "write") != NULL;
    }
    const char *count = getenv("SLUICE_FAULT_COUNT");
    if (count != NULL) {
        fault_count = strtol(count, NULL, 10);
    }
    __atomic_store_n(&configured, fault_path[0] != '\0' && fault_trigger[0] != '\0',
                     __ATOMIC_RELEASE);
}

/* How many injected failures are told on stderr; the log file gets them all. */
#define STDERR_REPORTS_MAX 3
static long stderr_reports;

/*
 * Appends "<call> <path>\n" to the fault log, and says the same on stderr for
 * the first few, so the broker's output shows that the fault happened without
 * drowning in a client's retries.
 */
static void record(const char *call, const char *path) {
    static const char prefix[] = "fsync_fault: injected EIO: ";
    char line[sizeof prefix + FAULT_TEXT_MAX + 64];
    int length = snprintf(line, sizeof line, "%s%s %s\n", prefix, call, path);
    if (length <= 0) {
        return;
    }
    if ((size_t)length >= sizeof line) {
        length = (int)sizeof line - 1;
    }
    /* One write per line, so lines from threads failing at once never mix. */
    if (fault_log[0] != '\0') {
        int log = open(fault_log, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
        if (log >= 0) {
            size_t skip = sizeof prefix - 1;
            (void)real_write(log, line + skip, (size_t)length - skip);
            close(log);
        }
    }
    if (__atomic_add_fetch(&stderr_reports, 1, __ATOMIC_ACQ_REL) <= STDERR_REPORTS_MAX) {
        (void)real_write(STDERR_FILENO, line, (size_t)length);
    }
}

/*
 * Whether the trigger file exists; if so, the failure budget and the arming
 * number it holds ("<count> <arming>"), or the environment's count and arming
 * 0 when it holds none.
 */
static int armed(long *budget, unsigned long *arming) {
    int trigger = open(fault_trigger, O_RDONLY | O_CLOEXEC);
    if (trigger < 0) {
        return 0;
    }
    char text[64];
    ssize_t length = read(trigger, text, sizeof text - 1);
    close(trigger);
    *budget = fault_count;
    *arming = 0;
    if (length > 0) {
        text[length] = '\0';
        char *end = text;
        long count = strtol(text, &end, 10);
        if (end != text) {
            *budget = count;
            *arming = strtoul(end, NULL, 10) & 0xffffffffUL;
        }
    }
    return 1;
}

/* Counts one matching call of `arming`; how many that arming has seen. */
static unsigned long count_call(unsigned long arming) {
    unsigned long long seen = __atomic_load_n(&arming_calls, __ATOMIC_ACQUIRE);
    for (;;) {
        unsigned long long calls = seen & 0xffffffffULL;
        unsigned long long next;
        if ((seen >> 32) != arming) {
            next = ((unsigned long long)arming << 32) | 1;
        } else {
            next = calls == 0xffffffffULL ? seen : seen + 1;
        }
        if (__atomic_compare_exchange_n(&arming_calls, &seen, next, 0, __ATOMIC_ACQ_REL,
                                        __ATOMIC_ACQUIRE)) {
            return (unsigned long)(next & 0xffffffffULL);
        }
    }
}

/*
 * True when this call on `fd` must fail: the shim is armed, the trigger file
 * exists, the file's path contains SLUICE_FAULT_PATH and the arming's failure
 * budget is not spent. Keeps errno as it was, since the caller may return
 * success.
 */
static int should_fail(int enabled, const char *call, int fd) {
    if (!enabled || !__atomic_load_n(&configured, __ATOMIC_ACQUIRE)) {
        return 0;
    }
    int saved = errno;
    int fail = 0;
    long budget;
    unsigned long arming;
    if (armed(&budget, &arming)) {
        char link[64];
        char path[FAULT_TEXT_MAX];
        snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
        ssize_t length = readlink(link, path, sizeof path - 1);
        if (length > 0) {
            path[length] = '\0';
            if (strstr(path, fault_path) != NULL) {
                unsigned long calls = count_call(arming);
                fail = budget <= 0 || calls <= (unsigned long)budget;
                if (fail) {
                    record(call, path);
                }
            }
        }
    }
    errno = saved;
    return fail;
}

int fsync(int fd) {
    if (should_fail(fail_sync, "fsync", fd)) {
        errno = EIO;
        return -1;
    }
    fsync_fn function = (fsync_fn)real("fsync", &real_fsync_slot);
    if (function == NULL) {
        errno = ENOSYS;
        return -1;
    }
    return function(fd);
}

int fdatasync(int fd) {
    if (should_fail(fail_sync, "fdatasync", fd)) {
        errno = EIO;
        return -1;
    }
    fsync_fn function = (fsync_fn)real("fdatasync", &real_fdatasync_slot);
    if (function == NULL) {
        errno = ENOSYS;
        return -1;
    }
    return function(fd);
}

int sync_file_range(int fd, off64_t offset, off64_t nbytes, unsigned int flags) {
    if (should_fail(fail_sync, "sync_file_range", fd)) {
        errno = EIO;
        return -1;
    }
    sync_file_range_fn function =
        (sync_file_range_fn)real("sync_file_range", &real_sync_file_range_slot);
    if (function == NULL) {
        errno = ENOSYS;
        return -1;
    }
    return function(fd, offset, nbytes, flags);
}

ssize_t write(int fd, const void *buffer, size_t length) {
    if (should_fail(fail_write, "write", fd)) {
        errno = EIO;
        return -1;
    }
    return real_write(fd, buffer, length);
}

ssize_t pwrite(int fd, const void *buffer, size_t length, off_t offset) {
    if (should_fail(fail_write, "pwrite", fd)) {
        errno = EIO;
        return -1;
    }
    pwrite_fn function = (pwrite_fn)real("pwrite", &real_pwrite_slot);
    if (function == NULL) {
        errno = ENOSYS;
        return -1;
    }
    return function(fd, buffer, length, offset);
}

ssize_t pwrite64(int fd, const void *buffer, size_t length, off64_t offset) {
    if (should_fail(fail_write, "pwrite64", fd)) {
        errno = EIO;
        return -1;
    }
    pwrite64_fn function = (pwrite64_fn)real("pwrite64", &real_pwrite64_slot);
    if (function == NULL) {
        errno = ENOSYS;
        return -1;
    }
    return function(fd, buffer, length, offset);
}
