/*
 * A clock-fault shim for the fault runs, loaded into the real broker with
 * LD_PRELOAD. It wraps the calls that read the wall clock (clock_gettime of
 * CLOCK_REALTIME and its coarse and TAI variants, timespec_get, gettimeofday,
 * time) and adds
 * an offset the test sets at any moment, so one broker's wall clock can jump
 * forward or back while the machine's and the others' do not. The monotonic
 * clocks (what timers and Instant read) are left alone, as a real clock step
 * by NTP or an operator leaves them.
 *
 * Configuration, read once when the library loads:
 *   SLUICE_CLOCK_OFFSET_FILE  a file of 8 bytes: the offset in milliseconds,
 *                             a little-endian signed 64-bit integer. The shim
 *                             maps it shared, so a test's write to it is seen
 *                             by the next clock read with no system call.
 *                             Unset, missing or short: no offset.
 *
 * The wrapped calls read the offset with one atomic load (no locks, no
 * malloc), so they are safe from any thread of the broker.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

/* glibc declares the time arguments nonnull; a caller may pass NULL anyway,
 * which the real calls tolerate, so the wrappers check. */
#pragma GCC diagnostic ignored "-Wnonnull-compare"

/* The size of the offset file, in bytes. */
#define OFFSET_FILE_BYTES 8

typedef int (*clock_gettime_fn)(clockid_t, struct timespec *);

static int64_t *offset_ms;
static clock_gettime_fn real_clock_gettime;

__attribute__((constructor)) static void configure(void) {
    real_clock_gettime = (clock_gettime_fn)dlsym(RTLD_NEXT, "clock_gettime");
    const char *path = getenv("SLUICE_CLOCK_OFFSET_FILE");
    if (path == NULL || *path == '\0') {
        return;
    }
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        return;
    }
    struct stat status;
    if (fstat(fd, &status) == 0 && status.st_size >= OFFSET_FILE_BYTES) {
        void *mapped = mmap(NULL, OFFSET_FILE_BYTES, PROT_READ, MAP_SHARED, fd, 0);
        if (mapped != MAP_FAILED) {
            __atomic_store_n(&offset_ms, (int64_t *)mapped, __ATOMIC_RELEASE);
        }
    }
    close(fd);
}

/* The offset now, in ms (0 when none is configured). */
static int64_t offset_now(void) {
    int64_t *mapped = __atomic_load_n(&offset_ms, __ATOMIC_ACQUIRE);
    return mapped == NULL ? 0 : __atomic_load_n(mapped, __ATOMIC_RELAXED);
}

static int is_wall_clock(clockid_t clock) {
    return clock == CLOCK_REALTIME || clock == CLOCK_REALTIME_COARSE || clock == CLOCK_TAI;
}

static void shift(struct timespec *time, int64_t by_ms) {
    int64_t nanos = (int64_t)time->tv_nsec + (by_ms % 1000) * 1000000;
    int64_t seconds = (int64_t)time->tv_sec + by_ms / 1000;
    if (nanos < 0) {
        nanos += 1000000000;
        seconds -= 1;
    } else if (nanos >= 1000000000) {
        nanos -= 1000000000;
        seconds += 1;
    }
    time->tv_sec = (time_t)seconds;
    time->tv_nsec = (long)nanos;
}

int clock_gettime(clockid_t clock, struct timespec *time) {
    clock_gettime_fn function = real_clock_gettime;
    if (function == NULL) {
        function = (clock_gettime_fn)dlsym(RTLD_NEXT, "clock_gettime");
        if (function == NULL) {
            errno = ENOSYS;
            return -1;
        }
    }
    int result = function(clock, time);
    if (result == 0 && time != NULL && is_wall_clock(clock)) {
        int64_t by = offset_now();
        if (by != 0) {
            shift(time, by);
        }
    }
    return result;
}

int gettimeofday(struct timeval *restrict value, void *restrict zone) {
    (void)zone;
    struct timespec now;
    if (clock_gettime(CLOCK_REALTIME, &now) != 0) {
        return -1;
    }
    if (value != NULL) {
        value->tv_sec = now.tv_sec;
        value->tv_usec = now.tv_nsec / 1000;
    }
    return 0;
}

int timespec_get(struct timespec *into, int base) {
    if (base != TIME_UTC || clock_gettime(CLOCK_REALTIME, into) != 0) {
        return 0;
    }
    return base;
}

time_t time(time_t *into) {
    struct timespec now;
    if (clock_gettime(CLOCK_REALTIME, &now) != 0) {
        return (time_t)-1;
    }
    if (into != NULL) {
        *into = now.tv_sec;
    }
    return now.tv_sec;
}
