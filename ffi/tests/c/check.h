/*
 * What the C test programs (a2a_test.c, a2a_misuse.c) share: checks that
 * exit loudly on the first failure with the library's last error, and
 * small helpers for a2a_str and parts.
 */
#ifndef A2A_TEST_CHECK_H
#define A2A_TEST_CHECK_H

#include "a2a.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Bound of any single expected happening (a hang guard, never a speed
 * measure; generous for Valgrind). */
#define WAIT_SECONDS 60

static inline void print_last_error(void) {
  char buf[512];
  size_t n = 0;
  if (a2a_last_error_message(buf, sizeof buf, &n) == A2A_STATUS_OK) {
    fprintf(stderr, "  last error [%s] rpc=%lld a2a=%d: %s\n",
            a2a_status_name(a2a_last_error_status()),
            (long long)a2a_last_error_rpc_code(), (int)a2a_last_error_a2a_code(), buf);
  }
}

#define CHECK(cond)                                                            \
  do {                                                                         \
    if (!(cond)) {                                                             \
      fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
      print_last_error();                                                      \
      exit(1);                                                                 \
    }                                                                          \
  } while (0)

#define EXPECT(call, want)                                                      \
  do {                                                                          \
    a2a_status st_ = (call);                                                    \
    if (st_ != (want)) {                                                        \
      fprintf(stderr, "%s:%d: %s -> %s, expected %s\n", __FILE__, __LINE__,     \
              #call, a2a_status_name(st_), a2a_status_name(want));              \
      print_last_error();                                                       \
      exit(1);                                                                  \
    }                                                                           \
  } while (0)

#define OK(call) EXPECT(call, A2A_STATUS_OK)

/* Waits until the process runs no thread but this one. A client freed
 * from one of its own callbacks lets its threads end on their own just
 * after (a2a.h, a2a_client_free): a program that returned at that instant
 * would leave them mid-way, which Valgrind reports as memory possibly
 * lost. The threads are the entries of /proc/self/task (Linux); one still
 * running after WAIT_SECONDS is stuck, and fails the program. */
static inline void wait_for_other_threads_to_end(void) {
  struct timespec start, now;
  clock_gettime(CLOCK_MONOTONIC, &start);
  for (;;) {
    int n = 0;
    DIR *d = opendir("/proc/self/task");
    CHECK(d != NULL);
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
      if (e->d_name[0] != '.') n++;
    closedir(d);
    if (n <= 1) return;
    clock_gettime(CLOCK_MONOTONIC, &now);
    if (now.tv_sec - start.tv_sec > WAIT_SECONDS) {
      fprintf(stderr, "%d threads still running at the end\n", n);
      CHECK(0);
    }
    struct timespec ten_ms = {0, 10 * 1000 * 1000};
    nanosleep(&ten_ms, NULL);
  }
}

static inline bool str_is(a2a_str s, const char *want) {
  size_t n = strlen(want);
  return s.ptr != NULL && s.len == n && memcmp(s.ptr, want, n) == 0;
}

static inline bool str_has(a2a_str s, const char *needle) {
  size_t n = strlen(needle);
  if (s.ptr == NULL || s.len < n) return false;
  for (size_t i = 0; i + n <= s.len; i++)
    if (memcmp(s.ptr + i, needle, n) == 0) return true;
  return false;
}

static inline char *dup_str(a2a_str s) {
  char *p = malloc(s.len + 1);
  CHECK(p != NULL);
  if (s.len) memcpy(p, s.ptr, s.len);
  p[s.len] = 0;
  return p;
}

static inline void deadline_in(struct timespec *ts, int seconds) {
  clock_gettime(CLOCK_REALTIME, ts);
  ts->tv_sec += seconds;
}

static inline a2a_parts *text_parts(const char *text) {
  a2a_parts *p = NULL;
  OK(a2a_parts_new(&p));
  OK(a2a_parts_add_text(p, text));
  return p;
}

#endif
