/*
 * The C ABI misused, against a real broker (spawned by the Rust driver,
 * tests/c_abi.rs, which passes its socket and secret):
 *
 *   a2a_misuse <socket> <secret> [section]
 *
 * Sections (all by default, in this order; one by name to see it alone):
 * - null:     every exported function with NULL for each pointer argument
 *             (A2A_STATUS_INVALID_ARGUMENT naming the argument, outputs
 *             untouched, callbacks never run; NULL accepted where optional);
 * - enums:    out-of-range values for every enumeration parameter (state,
 *             role, delivery mode, dispatch mode, status);
 * - size:     a2a_last_error_message asked for the size first;
 * - deadlock: a blocking call inside each kind of thread-mode callback
 *             (completion, event on the reader thread, event on the
 *             registering thread, event on the event ring's thread) gives
 *             A2A_STATUS_WOULD_DEADLOCK; in poll mode, and on another
 *             client, it works;
 * - frees:    the client, an agent, and owned values freed from inside
 *             completion and event callbacks, in poll mode (also from a
 *             nested poll) and thread mode (reader, event ring and
 *             registering threads), for push and pull agents.
 *
 * Exits 0 when everything holds; on the first wrong status prints where,
 * what came and what was expected, and exits 1. Memory errors are
 * Valgrind's to find (tests/c_abi.rs runs this under it too).
 */
#define _POSIX_C_SOURCE 200809L
#include "check.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <unistd.h>

static const char *g_socket;
static const char *g_secret;

/* The call fails with `want` and the calling thread's last error message
 * contains `needle`. */
#define EXPECT_ERR(call, want, needle)                                         \
  do {                                                                         \
    EXPECT(call, want);                                                        \
    char msg_[1024];                                                           \
    size_t n_ = 0;                                                             \
    OK(a2a_last_error_message(msg_, sizeof msg_, &n_));                        \
    if (strstr(msg_, (needle)) == NULL) {                                      \
      fprintf(stderr, "%s:%d: %s: last error \"%s\" lacks \"%s\"\n", __FILE__, \
              __LINE__, #call, msg_, (needle));                                \
      exit(1);                                                                 \
    }                                                                          \
  } while (0)

#define INVALID(call, needle) EXPECT_ERR(call, A2A_STATUS_INVALID_ARGUMENT, needle)

/* ---- callbacks that must never run ---- */

static int g_never;

static void never_task(void *ud, a2a_status st, const a2a_task *t) {
  (void)ud, (void)st, (void)t;
  g_never++;
}

static void never_reply(void *ud, a2a_status st, const a2a_reply *r) {
  (void)ud, (void)st, (void)r;
  g_never++;
}

static void never_event(void *ud, const a2a_event *ev) {
  (void)ud, (void)ev;
  g_never++;
}

/* ---- a flag set by a callback on another thread ---- */

typedef struct {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int done;
} flag;

static void flag_init(flag *f) {
  memset(f, 0, sizeof *f);
  pthread_mutex_init(&f->mu, NULL);
  pthread_cond_init(&f->cv, NULL);
}

static void flag_destroy(flag *f) {
  pthread_mutex_destroy(&f->mu);
  pthread_cond_destroy(&f->cv);
}

static void flag_raise(flag *f) {
  pthread_mutex_lock(&f->mu);
  f->done++;
  pthread_cond_broadcast(&f->cv);
  pthread_mutex_unlock(&f->mu);
}

static void flag_wait(flag *f, int n) {
  struct timespec ts;
  deadline_in(&ts, WAIT_SECONDS);
  pthread_mutex_lock(&f->mu);
  while (f->done < n)
    if (pthread_cond_timedwait(&f->cv, &f->mu, &ts) == ETIMEDOUT) break;
  int done = f->done;
  pthread_mutex_unlock(&f->mu);
  CHECK(done >= n);
}

/* ---- setup helpers ---- */

static a2a_client *connect_mode(a2a_dispatch dispatch, size_t ring_bytes) {
  a2a_client_options opts;
  memset(&opts, 0, sizeof opts);
  opts.dispatch = dispatch;
  opts.event_ring_bytes = ring_bytes;
  opts.client_name = "a2a_misuse.c";
  a2a_client *c = NULL;
  OK(a2a_client_new(g_socket, g_secret, &opts, &c));
  return c;
}

static a2a_agent *reg(const a2a_client *c, const char *ctx, const char *name) {
  a2a_agent *a = NULL;
  OK(a2a_client_register(c, ctx, name, NULL, A2A_DELIVERY_PUSH, &a));
  return a;
}

/* `from` creates a task for `to_name`; returns its id (owned). */
static char *send_text(const a2a_agent *from, const char *to_name, const char *text) {
  a2a_parts *p = text_parts(text);
  a2a_task *t = NULL;
  OK(a2a_agent_send(from, to_name, p, NULL, &t));
  a2a_parts_free(p);
  char *id = dup_str(t->id);
  a2a_task_free(t);
  return id;
}

/* Runs a poll-mode client's callbacks until `*done` reaches `want`. The
 * client may be freed by one of them: `c` is then not used again. */
static void poll_until(a2a_client *c, const int *done, int want) {
  int fd = -1;
  OK(a2a_client_fd(c, &fd));
  time_t end = time(NULL) + WAIT_SECONDS;
  while (*done < want && time(NULL) < end) {
    struct pollfd pfd = {.fd = fd, .events = POLLIN, .revents = 0};
    int n = poll(&pfd, 1, 200);
    CHECK(n >= 0 || errno == EINTR);
    if (n <= 0) continue;
    size_t ran = 0;
    OK(a2a_client_poll(c, 16, &ran));
  }
  CHECK(*done >= want);
}

/* ==== null: every pointer argument ==== */

static void nulls(void) {
  a2a_client *c = connect_mode(A2A_DISPATCH_THREAD, 0);
  a2a_client *pc = connect_mode(A2A_DISPATCH_POLL, 0);
  a2a_agent *a = reg(c, "misuse-null", "null-a");
  a2a_parts *p = text_parts("x");
  const char *id = "no-such-task";
  g_never = 0;

  /* Outputs stay untouched on failure. */
  a2a_client *sc = (a2a_client *)&g_socket, *co = sc;
  a2a_agent *sa = (a2a_agent *)&g_socket, *ao = sa;
  a2a_task *st = (a2a_task *)&g_socket, *to = st;
  a2a_reply *sr = (a2a_reply *)&g_socket, *ro = sr;
  a2a_event *se = (a2a_event *)&g_socket, *eo = se;

  /* client */
  INVALID(a2a_client_new(NULL, g_secret, NULL, &co), "`socket` is NULL");
  INVALID(a2a_client_new(g_socket, g_secret, NULL, NULL), "`out` is NULL");
  CHECK(co == sc);
  a2a_client_free(NULL);
  INVALID(a2a_client_close(NULL), "`client` is NULL");
  CHECK(!a2a_client_uses_event_ring(NULL));
  int fd = -7;
  INVALID(a2a_client_fd(NULL, &fd), "`client` is NULL");
  INVALID(a2a_client_fd(pc, NULL), "`out_fd` is NULL");
  CHECK(fd == -7);
  size_t n = 99;
  INVALID(a2a_client_poll(NULL, 1, &n), "`client` is NULL");
  INVALID(a2a_client_poll(pc, 1, NULL), "`out_n` is NULL");
  CHECK(n == 99);
  INVALID(a2a_client_register(NULL, "ctx", "n", NULL, A2A_DELIVERY_PUSH, &ao), "`client` is NULL");
  INVALID(a2a_client_register(c, NULL, "n", NULL, A2A_DELIVERY_PUSH, &ao), "`context_id` is NULL");
  INVALID(a2a_client_register(c, "ctx", NULL, NULL, A2A_DELIVERY_PUSH, &ao), "`name` is NULL");
  INVALID(a2a_client_register(c, "ctx", "n", NULL, A2A_DELIVERY_PUSH, NULL), "`out` is NULL");
  CHECK(ao == sa);
  INVALID(a2a_client_register_async(NULL, "ctx", "n", NULL, A2A_DELIVERY_PUSH, never_reply, NULL), "`client` is NULL");
  INVALID(a2a_client_register_async(c, NULL, "n", NULL, A2A_DELIVERY_PUSH, never_reply, NULL), "`context_id` is NULL");
  INVALID(a2a_client_register_async(c, "ctx", NULL, NULL, A2A_DELIVERY_PUSH, never_reply, NULL), "`name` is NULL");
  INVALID(a2a_client_register_async(c, "ctx", "n", NULL, A2A_DELIVERY_PUSH, NULL, NULL), "`cb` is NULL");
  INVALID(a2a_client_call_json(NULL, "a2a.agents.list", NULL, &ro), "`client` is NULL");
  INVALID(a2a_client_call_json(c, NULL, NULL, &ro), "`method` is NULL");
  INVALID(a2a_client_call_json(c, "a2a.agents.list", NULL, NULL), "`out` is NULL");
  CHECK(ro == sr);
  INVALID(a2a_client_call_json_async(NULL, "a2a.agents.list", NULL, never_reply, NULL), "`client` is NULL");
  INVALID(a2a_client_call_json_async(c, NULL, NULL, never_reply, NULL), "`method` is NULL");
  INVALID(a2a_client_call_json_async(c, "a2a.agents.list", NULL, NULL, NULL), "`cb` is NULL");

  /* agent handle */
  a2a_agent_free(NULL);
  INVALID(a2a_agent_clone(NULL, &ao), "`agent` is NULL");
  INVALID(a2a_agent_clone(a, NULL), "`out` is NULL");
  CHECK(ao == sa);
  CHECK(a2a_agent_id(NULL).ptr == NULL && a2a_agent_id(NULL).len == 0);
  CHECK(a2a_agent_token(NULL).ptr == NULL);
  CHECK(a2a_agent_context_id(NULL).ptr == NULL);
  INVALID(a2a_agent_set_event_cb(NULL, never_event, NULL), "`agent` is NULL");
  OK(a2a_agent_set_event_cb(a, NULL, NULL)); /* NULL cb: removes (none set) */
  INVALID(a2a_agent_next_event(NULL, &eo), "`agent` is NULL");
  INVALID(a2a_agent_next_event(a, NULL), "`out` is NULL");
  INVALID(a2a_agent_wait_event(NULL, 0, &eo), "`agent` is NULL");
  INVALID(a2a_agent_wait_event(a, 0, NULL), "`out` is NULL");
  CHECK(eo == se);

  /* the calls: every required pointer, blocking and submitted */
  INVALID(a2a_agent_list_agents(NULL, NULL, &ro), "`agent` is NULL");
  INVALID(a2a_agent_list_agents(a, NULL, NULL), "`out` is NULL");
  INVALID(a2a_agent_list_agents_async(NULL, NULL, never_reply, NULL), "`agent` is NULL");
  INVALID(a2a_agent_list_agents_async(a, NULL, NULL, NULL), "`cb` is NULL");
  INVALID(a2a_agent_list_tasks(NULL, A2A_LIST_ROLE_ANY, A2A_STATE_UNSET, 0, NULL, &ro), "`agent` is NULL");
  INVALID(a2a_agent_list_tasks(a, A2A_LIST_ROLE_ANY, A2A_STATE_UNSET, 0, NULL, NULL), "`out` is NULL");
  INVALID(a2a_agent_list_tasks_async(NULL, A2A_LIST_ROLE_ANY, A2A_STATE_UNSET, 0, NULL, never_reply, NULL), "`agent` is NULL");
  INVALID(a2a_agent_list_tasks_async(a, A2A_LIST_ROLE_ANY, A2A_STATE_UNSET, 0, NULL, NULL, NULL), "`cb` is NULL");
  INVALID(a2a_agent_set_push_config(NULL, id, "cfg", NULL, NULL, &ro), "`agent` is NULL");
  INVALID(a2a_agent_set_push_config(a, NULL, "cfg", NULL, NULL, &ro), "`task_id` is NULL");
  INVALID(a2a_agent_set_push_config(a, id, NULL, NULL, NULL, &ro), "`config_id` is NULL");
  INVALID(a2a_agent_set_push_config(a, id, "cfg", NULL, NULL, NULL), "`out` is NULL");
  INVALID(a2a_agent_set_push_config_async(NULL, id, "cfg", NULL, NULL, never_reply, NULL), "`agent` is NULL");
  INVALID(a2a_agent_set_push_config_async(a, NULL, "cfg", NULL, NULL, never_reply, NULL), "`task_id` is NULL");
  INVALID(a2a_agent_set_push_config_async(a, id, NULL, NULL, NULL, never_reply, NULL), "`config_id` is NULL");
  INVALID(a2a_agent_set_push_config_async(a, id, "cfg", NULL, NULL, NULL, NULL), "`cb` is NULL");
  INVALID(a2a_agent_get_push_config(NULL, id, &ro), "`agent` is NULL");
  INVALID(a2a_agent_get_push_config(a, NULL, &ro), "`task_id` is NULL");
  INVALID(a2a_agent_get_push_config(a, id, NULL), "`out` is NULL");
  INVALID(a2a_agent_get_push_config_async(NULL, id, never_reply, NULL), "`agent` is NULL");
  INVALID(a2a_agent_get_push_config_async(a, NULL, never_reply, NULL), "`task_id` is NULL");
  INVALID(a2a_agent_get_push_config_async(a, id, NULL, NULL), "`cb` is NULL");
  INVALID(a2a_agent_deregister(NULL), "`agent` is NULL");
  INVALID(a2a_agent_deregister_async(NULL, never_reply, NULL), "`agent` is NULL");
  INVALID(a2a_agent_deregister_async(a, NULL, NULL), "`cb` is NULL");
  INVALID(a2a_agent_send(NULL, "x", p, NULL, &to), "`agent` is NULL");
  INVALID(a2a_agent_send(a, "x", NULL, NULL, &to), "`parts` is NULL");
  INVALID(a2a_agent_send(a, "x", p, NULL, NULL), "`out` is NULL");
  INVALID(a2a_agent_send_async(NULL, "x", p, NULL, never_task, NULL), "`agent` is NULL");
  INVALID(a2a_agent_send_async(a, "x", NULL, NULL, never_task, NULL), "`parts` is NULL");
  INVALID(a2a_agent_send_async(a, "x", p, NULL, NULL, NULL), "`cb` is NULL");
  INVALID(a2a_agent_send_followup(NULL, id, p, NULL, &to), "`agent` is NULL");
  INVALID(a2a_agent_send_followup(a, NULL, p, NULL, &to), "`task_id` is NULL");
  INVALID(a2a_agent_send_followup(a, id, NULL, NULL, &to), "`parts` is NULL");
  INVALID(a2a_agent_send_followup(a, id, p, NULL, NULL), "`out` is NULL");
  INVALID(a2a_agent_send_followup_async(NULL, id, p, NULL, never_task, NULL), "`agent` is NULL");
  INVALID(a2a_agent_send_followup_async(a, NULL, p, NULL, never_task, NULL), "`task_id` is NULL");
  INVALID(a2a_agent_send_followup_async(a, id, NULL, NULL, never_task, NULL), "`parts` is NULL");
  INVALID(a2a_agent_send_followup_async(a, id, p, NULL, NULL, NULL), "`cb` is NULL");
  INVALID(a2a_agent_broadcast(NULL, p, NULL, &ro), "`agent` is NULL");
  INVALID(a2a_agent_broadcast(a, NULL, NULL, &ro), "`parts` is NULL");
  INVALID(a2a_agent_broadcast(a, p, NULL, NULL), "`out` is NULL");
  INVALID(a2a_agent_broadcast_async(NULL, p, NULL, never_reply, NULL), "`agent` is NULL");
  INVALID(a2a_agent_broadcast_async(a, NULL, NULL, never_reply, NULL), "`parts` is NULL");
  INVALID(a2a_agent_broadcast_async(a, p, NULL, NULL, NULL), "`cb` is NULL");
  INVALID(a2a_agent_set_status(NULL, id, A2A_STATE_WORKING, NULL, &to), "`agent` is NULL");
  INVALID(a2a_agent_set_status(a, NULL, A2A_STATE_WORKING, NULL, &to), "`task_id` is NULL");
  INVALID(a2a_agent_set_status(a, id, A2A_STATE_WORKING, NULL, NULL), "`out` is NULL");
  INVALID(a2a_agent_set_status_async(NULL, id, A2A_STATE_WORKING, NULL, never_task, NULL), "`agent` is NULL");
  INVALID(a2a_agent_set_status_async(a, NULL, A2A_STATE_WORKING, NULL, never_task, NULL), "`task_id` is NULL");
  INVALID(a2a_agent_set_status_async(a, id, A2A_STATE_WORKING, NULL, NULL, NULL), "`cb` is NULL");
  INVALID(a2a_agent_add_artifact(NULL, id, "art", NULL, p, false, true, &to), "`agent` is NULL");
  INVALID(a2a_agent_add_artifact(a, NULL, "art", NULL, p, false, true, &to), "`task_id` is NULL");
  INVALID(a2a_agent_add_artifact(a, id, NULL, NULL, p, false, true, &to), "`artifact_id` is NULL");
  INVALID(a2a_agent_add_artifact(a, id, "art", NULL, NULL, false, true, &to), "`parts` is NULL");
  INVALID(a2a_agent_add_artifact(a, id, "art", NULL, p, false, true, NULL), "`out` is NULL");
  INVALID(a2a_agent_add_artifact_async(NULL, id, "art", NULL, p, false, true, never_task, NULL), "`agent` is NULL");
  INVALID(a2a_agent_add_artifact_async(a, NULL, "art", NULL, p, false, true, never_task, NULL), "`task_id` is NULL");
  INVALID(a2a_agent_add_artifact_async(a, id, NULL, NULL, p, false, true, never_task, NULL), "`artifact_id` is NULL");
  INVALID(a2a_agent_add_artifact_async(a, id, "art", NULL, NULL, false, true, never_task, NULL), "`parts` is NULL");
  INVALID(a2a_agent_add_artifact_async(a, id, "art", NULL, p, false, true, NULL, NULL), "`cb` is NULL");
  INVALID(a2a_agent_cancel(NULL, id, NULL, &to), "`agent` is NULL");
  INVALID(a2a_agent_cancel(a, NULL, NULL, &to), "`task_id` is NULL");
  INVALID(a2a_agent_cancel(a, id, NULL, NULL), "`out` is NULL");
  INVALID(a2a_agent_cancel_async(NULL, id, NULL, never_task, NULL), "`agent` is NULL");
  INVALID(a2a_agent_cancel_async(a, NULL, NULL, never_task, NULL), "`task_id` is NULL");
  INVALID(a2a_agent_cancel_async(a, id, NULL, NULL, NULL), "`cb` is NULL");
  INVALID(a2a_agent_get_task(NULL, id, -1, &to), "`agent` is NULL");
  INVALID(a2a_agent_get_task(a, NULL, -1, &to), "`task_id` is NULL");
  INVALID(a2a_agent_get_task(a, id, -1, NULL), "`out` is NULL");
  INVALID(a2a_agent_get_task_async(NULL, id, -1, never_task, NULL), "`agent` is NULL");
  INVALID(a2a_agent_get_task_async(a, NULL, -1, never_task, NULL), "`task_id` is NULL");
  INVALID(a2a_agent_get_task_async(a, id, -1, NULL, NULL), "`cb` is NULL");
  INVALID(a2a_agent_resubscribe(NULL, id, -1, &to), "`agent` is NULL");
  INVALID(a2a_agent_resubscribe(a, NULL, -1, &to), "`task_id` is NULL");
  INVALID(a2a_agent_resubscribe(a, id, -1, NULL), "`out` is NULL");
  INVALID(a2a_agent_resubscribe_async(NULL, id, -1, never_task, NULL), "`agent` is NULL");
  INVALID(a2a_agent_resubscribe_async(a, NULL, -1, never_task, NULL), "`task_id` is NULL");
  INVALID(a2a_agent_resubscribe_async(a, id, -1, NULL, NULL), "`cb` is NULL");
  CHECK(to == st && ro == sr);

  /* parts */
  INVALID(a2a_parts_new(NULL), "`out` is NULL");
  a2a_parts_free(NULL);
  INVALID(a2a_parts_add_text(NULL, "t"), "`parts` is NULL");
  INVALID(a2a_parts_add_text(p, NULL), "`text` is NULL");
  INVALID(a2a_parts_add_data(NULL, "{}"), "`parts` is NULL");
  INVALID(a2a_parts_add_data(p, NULL), "`json` is NULL");
  INVALID(a2a_parts_add_file(NULL, NULL, NULL, NULL, 0), "`parts` is NULL");
  INVALID(a2a_parts_add_file(p, NULL, NULL, NULL, 3), "`bytes`");
  INVALID(a2a_parts_add_file_uri(NULL, NULL, NULL, "file:///x"), "`parts` is NULL");
  INVALID(a2a_parts_add_file_uri(p, NULL, NULL, NULL), "`uri` is NULL");
  INVALID(a2a_parts_set_metadata(NULL, "{}"), "`parts` is NULL");
  INVALID(a2a_parts_set_message_id(NULL, "m"), "`parts` is NULL");

  /* owned values, the last error */
  a2a_task_free(NULL);
  a2a_reply_free(NULL);
  a2a_event_free(NULL);
  char buf[8];
  size_t m = 0;
  EXPECT(a2a_last_error_message(NULL, sizeof buf, &m), A2A_STATUS_INVALID_ARGUMENT);
  EXPECT(a2a_last_error_message(buf, sizeof buf, NULL), A2A_STATUS_INVALID_ARGUMENT);
  CHECK(m == 0);

  /* NULL where it is optional: accepted */
  OK(a2a_agent_list_agents(a, NULL, &ro));
  CHECK(ro != sr && ro->kind == A2A_REPLY_KIND_AGENTS);
  a2a_reply_free(ro);
  OK(a2a_agent_list_tasks(a, A2A_LIST_ROLE_ANY, A2A_STATE_UNSET, 0, NULL, &ro));
  a2a_reply_free(ro);
  OK(a2a_parts_set_metadata(p, NULL));
  OK(a2a_parts_set_message_id(p, NULL));
  OK(a2a_parts_add_file(p, NULL, NULL, NULL, 0));

  /* a submitted call that failed never runs its callback; nor does an
   * event callback that was never set */
  CHECK(g_never == 0);
  a2a_parts_free(p);
  a2a_agent_free(a);
  a2a_client_free(pc);
  a2a_client_free(c);
  CHECK(g_never == 0);
  printf("null: every pointer argument checked\n");
}

/* ==== enums: out-of-range values ==== */

static void enums(void) {
  a2a_client *c = connect_mode(A2A_DISPATCH_THREAD, 0);
  a2a_agent *a = reg(c, "misuse-enum", "enum-a");
  a2a_agent *b = reg(c, "misuse-enum", "enum-b");
  char *task = send_text(a, "enum-b", "states");
  g_never = 0;
  a2a_task *st = (a2a_task *)&g_socket, *to = st;
  a2a_reply *sr = (a2a_reply *)&g_socket, *ro = sr;
  a2a_agent *sa = (a2a_agent *)&g_socket, *ao = sa;

  /* state: out of range, negative, and UNSET where a state is needed */
  const a2a_state bad_states[] = {99, -1, 9, 1000, INT32_MIN, INT32_MAX};
  for (size_t i = 0; i < sizeof bad_states / sizeof bad_states[0]; i++) {
    char want[64];
    snprintf(want, sizeof want, "`state` is %d;", (int)bad_states[i]);
    INVALID(a2a_agent_set_status(b, task, bad_states[i], NULL, &to), want);
    INVALID(a2a_agent_set_status(b, task, bad_states[i], NULL, &to), "A2A_STATE_REJECTED (7)");
    INVALID(a2a_agent_set_status_async(b, task, bad_states[i], NULL, never_task, NULL), want);
    INVALID(a2a_agent_list_tasks(a, A2A_LIST_ROLE_ANY, bad_states[i], 0, NULL, &ro), want);
    INVALID(a2a_agent_list_tasks(a, A2A_LIST_ROLE_ANY, bad_states[i], 0, NULL, &ro), "A2A_STATE_UNSET (8)");
    INVALID(a2a_agent_list_tasks_async(a, A2A_LIST_ROLE_ANY, bad_states[i], 0, NULL, never_reply, NULL), want);
  }
  INVALID(a2a_agent_set_status(b, task, A2A_STATE_UNSET, NULL, &to), "`state` is 8;");
  INVALID(a2a_agent_set_status_async(b, task, A2A_STATE_UNSET, NULL, never_task, NULL), "`state` is 8;");

  /* role */
  const a2a_list_role bad_roles[] = {42, -1, 3, INT32_MIN};
  for (size_t i = 0; i < sizeof bad_roles / sizeof bad_roles[0]; i++) {
    char want[64];
    snprintf(want, sizeof want, "`role` is %d;", (int)bad_roles[i]);
    INVALID(a2a_agent_list_tasks(a, bad_roles[i], A2A_STATE_UNSET, 0, NULL, &ro), want);
    INVALID(a2a_agent_list_tasks(a, bad_roles[i], A2A_STATE_UNSET, 0, NULL, &ro), "A2A_LIST_ROLE_REQUESTER (2)");
    INVALID(a2a_agent_list_tasks_async(a, bad_roles[i], A2A_STATE_UNSET, 0, NULL, never_reply, NULL), want);
  }

  /* delivery mode */
  const a2a_delivery bad_deliveries[] = {9, -1, 2, INT32_MAX};
  for (size_t i = 0; i < sizeof bad_deliveries / sizeof bad_deliveries[0]; i++) {
    char want[64];
    snprintf(want, sizeof want, "`delivery_mode` is %d;", (int)bad_deliveries[i]);
    INVALID(a2a_client_register(c, "misuse-enum", "never", NULL, bad_deliveries[i], &ao), want);
    INVALID(a2a_client_register(c, "misuse-enum", "never", NULL, bad_deliveries[i], &ao), "A2A_DELIVERY_PULL (1)");
    INVALID(a2a_client_register_async(c, "misuse-enum", "never", NULL, bad_deliveries[i], never_reply, NULL), want);
  }

  /* dispatch mode */
  const a2a_dispatch bad_dispatch[] = {7, -1, 2};
  for (size_t i = 0; i < sizeof bad_dispatch / sizeof bad_dispatch[0]; i++) {
    a2a_client_options opts;
    memset(&opts, 0, sizeof opts);
    opts.dispatch = bad_dispatch[i];
    a2a_client *sc = (a2a_client *)&g_socket, *co = sc;
    char want[64];
    snprintf(want, sizeof want, "`options->dispatch` is %d;", (int)bad_dispatch[i]);
    INVALID(a2a_client_new(g_socket, g_secret, &opts, &co), want);
    INVALID(a2a_client_new(g_socket, g_secret, &opts, &co), "A2A_DISPATCH_POLL (1)");
    CHECK(co == sc);
  }

  /* status (a2a_status_name): not a status, named so */
  CHECK(strcmp(a2a_status_name((a2a_status)99), "unknown") == 0);
  CHECK(strcmp(a2a_status_name((a2a_status)-1), "unknown") == 0);
  CHECK(strcmp(a2a_status_name(A2A_STATUS_WOULD_DEADLOCK), "would_deadlock") == 0);

  CHECK(to == st && ro == sr && ao == sa);

  /* Nothing was registered or changed: the valid values still work, and
   * the task is where it was. */
  OK(a2a_agent_list_tasks(a, A2A_LIST_ROLE_REQUESTER, A2A_STATE_SUBMITTED, 0, NULL, &ro));
  CHECK(ro->tasks_len == 1 && str_is(ro->tasks[0].id, task));
  a2a_reply_free(ro);
  OK(a2a_agent_list_agents(a, NULL, &ro));
  CHECK(ro->agents_len == 1 && str_is(ro->agents[0].name, "enum-b"));
  a2a_reply_free(ro);
  OK(a2a_agent_set_status(b, task, A2A_STATE_REJECTED, NULL, &to));
  CHECK(to->state == A2A_STATE_REJECTED);
  a2a_task_free(to);

  a2a_agent_free(a);
  a2a_agent_free(b);
  a2a_client_free(c);
  CHECK(g_never == 0);
  free(task);
  printf("enums: every out-of-range value refused, naming the parameter\n");
}

/* ==== size: the last error's size asked first ==== */

static void size_first(void) {
  EXPECT(a2a_agent_get_task(NULL, "x", -1, NULL), A2A_STATUS_INVALID_ARGUMENT);
  size_t need = 0;
  OK(a2a_last_error_message(NULL, 0, &need));
  char *buf = malloc(need);
  CHECK(buf != NULL);
  size_t got = 0;
  OK(a2a_last_error_message(buf, need, &got));
  CHECK(got + 1 == need && strlen(buf) == got);
  CHECK(strstr(buf, "`agent` is NULL") != NULL);
  /* a buffer with len 0 is a size query too, and nothing is written */
  char one = 'z';
  size_t again = 0;
  OK(a2a_last_error_message(&one, 0, &again));
  CHECK(again == need && one == 'z');
  /* the queries did not disturb the error */
  CHECK(a2a_last_error_status() == A2A_STATUS_INVALID_ARGUMENT);
  free(buf);
  printf("size: the size query answers %zu\n", need);
}

/* ==== deadlock: blocking calls inside thread-mode callbacks ==== */

typedef struct {
  flag f;
  const a2a_client *client; /* the callback's own client */
  const a2a_agent *agent;   /* an agent of that client */
  const a2a_agent *other;   /* an agent of another client */
  const char *task;         /* a task both may read */
  pthread_t thread;
  a2a_status get, wait, call, reg, dereg, other_get;
} try_block;

static void try_blocking_calls(try_block *tb) {
  a2a_task *t = NULL;
  tb->get = a2a_agent_get_task(tb->agent, tb->task, 0, &t);
  a2a_task_free(t);
  t = NULL;
  a2a_event *ev = NULL;
  tb->wait = a2a_agent_wait_event(tb->agent, 10, &ev);
  a2a_event_free(ev);
  a2a_reply *r = NULL;
  tb->call = a2a_client_call_json(tb->client, "a2a.agents.list", NULL, &r);
  a2a_reply_free(r);
  a2a_agent *x = NULL;
  tb->reg = a2a_client_register(tb->client, "misuse-dl", "never-registered", NULL, A2A_DELIVERY_PUSH, &x);
  a2a_agent_free(x);
  tb->dereg = a2a_agent_deregister(tb->agent);
  /* another client's blocking call is not refused */
  tb->other_get = tb->other ? a2a_agent_get_task(tb->other, tb->task, 0, &t) : A2A_STATUS_OK;
  a2a_task_free(t);
  tb->thread = pthread_self();
}

static void on_event_try_blocking(void *ud, const a2a_event *ev) {
  try_block *tb = ud;
  (void)ev;
  /* The lock orders this after the main thread's writes to `tb`. */
  pthread_mutex_lock(&tb->f.mu);
  int done = tb->f.done;
  pthread_mutex_unlock(&tb->f.mu);
  if (done) return; /* once */
  try_blocking_calls(tb);
  flag_raise(&tb->f);
}

static void on_task_try_blocking(void *ud, a2a_status st, const a2a_task *t) {
  try_block *tb = ud;
  (void)t;
  EXPECT(st, A2A_STATUS_OK);
  try_blocking_calls(tb);
  flag_raise(&tb->f);
}

static void expect_refused(const try_block *tb, const char *where) {
  printf("deadlock: %s\n", where);
  EXPECT(tb->get, A2A_STATUS_WOULD_DEADLOCK);
  EXPECT(tb->wait, A2A_STATUS_WOULD_DEADLOCK);
  EXPECT(tb->call, A2A_STATUS_WOULD_DEADLOCK);
  EXPECT(tb->reg, A2A_STATUS_WOULD_DEADLOCK);
  EXPECT(tb->dereg, A2A_STATUS_WOULD_DEADLOCK);
  EXPECT(tb->other_get, A2A_STATUS_OK);
}

static void deadlocks(void) {
  /* The requester's own client: its blocking calls are the "other
   * client" ones. */
  a2a_client *rc = connect_mode(A2A_DISPATCH_THREAD, 0);
  a2a_agent *req = reg(rc, "misuse-dl", "dl-req");
  try_block tb;

  /* 1. An event callback run on the registering thread: the event was
   * queued before the callback was set. The worker's own blocking call
   * returns after the event was read (one socket, in order), so the event
   * is queued when the callback is set. */
  {
    a2a_client *wc = connect_mode(A2A_DISPATCH_THREAD, 0);
    a2a_agent *w = reg(wc, "misuse-dl", "dl-w1");
    char *task = send_text(req, "dl-w1", "queued first");
    a2a_task *t = NULL;
    OK(a2a_agent_get_task(w, task, 0, &t));
    a2a_task_free(t);
    memset(&tb, 0, sizeof tb);
    flag_init(&tb.f);
    tb.client = wc, tb.agent = w, tb.other = req, tb.task = task;
    OK(a2a_agent_set_event_cb(w, on_event_try_blocking, &tb));
    flag_wait(&tb.f, 1);
    CHECK(pthread_equal(tb.thread, pthread_self()));
    expect_refused(&tb, "event callback on the registering thread");
    OK(a2a_agent_set_event_cb(w, NULL, NULL));
    flag_destroy(&tb.f);
    a2a_agent_free(w);
    a2a_client_free(wc);
    free(task);
  }

  /* 2. An event callback on the reader thread. */
  {
    a2a_client *wc = connect_mode(A2A_DISPATCH_THREAD, 0);
    a2a_agent *w = reg(wc, "misuse-dl", "dl-w2");
    memset(&tb, 0, sizeof tb);
    flag_init(&tb.f);
    OK(a2a_agent_set_event_cb(w, on_event_try_blocking, &tb));
    tb.client = wc, tb.agent = w, tb.other = req;
    /* the task id is known once the send returns; the callback reads it
     * only after the event comes, which the send precedes */
    pthread_mutex_lock(&tb.f.mu);
    char *task = send_text(req, "dl-w2", "on the reader");
    tb.task = task;
    pthread_mutex_unlock(&tb.f.mu);
    flag_wait(&tb.f, 1);
    CHECK(!pthread_equal(tb.thread, pthread_self()));
    expect_refused(&tb, "event callback on the reader thread");
    OK(a2a_agent_set_event_cb(w, NULL, NULL));
    flag_destroy(&tb.f);
    a2a_agent_free(w);
    a2a_client_free(wc);
    free(task);
  }

  /* 3. An event callback on the event ring's thread, if granted. */
  {
    a2a_client *wc = connect_mode(A2A_DISPATCH_THREAD, 1 << 20);
    if (a2a_client_uses_event_ring(wc)) {
      a2a_agent *w = reg(wc, "misuse-dl", "dl-w3");
      memset(&tb, 0, sizeof tb);
      flag_init(&tb.f);
      OK(a2a_agent_set_event_cb(w, on_event_try_blocking, &tb));
      tb.client = wc, tb.agent = w, tb.other = req;
      pthread_mutex_lock(&tb.f.mu);
      char *task = send_text(req, "dl-w3", "through the ring");
      tb.task = task;
      pthread_mutex_unlock(&tb.f.mu);
      flag_wait(&tb.f, 1);
      CHECK(!pthread_equal(tb.thread, pthread_self()));
      expect_refused(&tb, "event callback on the event ring's thread");
      OK(a2a_agent_set_event_cb(w, NULL, NULL));
      flag_destroy(&tb.f);
      a2a_agent_free(w);
      free(task);
    } else {
      printf("deadlock: event ring declined, its thread not tried\n");
    }
    a2a_client_free(wc);
  }

  /* 4. A completion callback. */
  {
    a2a_client *wc = connect_mode(A2A_DISPATCH_THREAD, 0);
    a2a_agent *w = reg(wc, "misuse-dl", "dl-w4");
    char *task = send_text(req, "dl-w4", "completion");
    memset(&tb, 0, sizeof tb);
    flag_init(&tb.f);
    tb.client = wc, tb.agent = w, tb.other = req, tb.task = task;
    OK(a2a_agent_get_task_async(w, task, 0, on_task_try_blocking, &tb));
    flag_wait(&tb.f, 1);
    expect_refused(&tb, "completion callback");
    flag_destroy(&tb.f);
    a2a_agent_free(w);
    a2a_client_free(wc);
    free(task);
  }

  /* 5. Poll mode: the host's own thread runs the callbacks, and may block. */
  {
    a2a_client *pc = connect_mode(A2A_DISPATCH_POLL, 0);
    a2a_agent *w = reg(pc, "misuse-dl", "dl-w5");
    char *task = send_text(req, "dl-w5", "poll");
    memset(&tb, 0, sizeof tb);
    flag_init(&tb.f);
    tb.client = pc, tb.agent = w, tb.other = req, tb.task = task;
    OK(a2a_agent_get_task_async(w, task, 0, on_task_try_blocking, &tb));
    poll_until(pc, &tb.f.done, 1);
    printf("deadlock: poll mode blocks\n");
    OK(tb.get);
    OK(tb.wait); /* the task's event, queued before the answer */
    EXPECT(tb.call, A2A_STATUS_RPC); /* no token: the broker's refusal */
    OK(tb.reg);
    OK(tb.dereg);
    OK(tb.other_get);
    flag_destroy(&tb.f);
    a2a_agent_free(w);
    a2a_client_free(pc);
    free(task);
  }

  a2a_agent_free(req);
  a2a_client_free(rc);
}

/* ==== frees from inside callbacks ==== */

typedef struct {
  a2a_client *client; /* freed by the callback when set */
  a2a_agent *agent;   /* freed by the callback when set */
  a2a_task *task;     /* owned values freed by the callback */
  a2a_reply *reply;
  a2a_event *event;
  a2a_parts *parts;
  int runs;
  a2a_status status;
  a2a_status after; /* the last error status once the frees returned */
  flag f;
} freer;

static void freer_init(freer *fr) {
  memset(fr, 0, sizeof *fr);
  flag_init(&fr->f);
}

/* Frees what `fr` holds, in the order a host would tear down: owned
 * values, the agent, the client. A sentinel last error first: a panic
 * inside the frees would replace it with A2A_STATUS_PANIC (callbacks that
 * the client's free runs here may replace it with their own failure). */
static void free_held(freer *fr) {
  EXPECT(a2a_client_close(NULL), A2A_STATUS_INVALID_ARGUMENT);
  a2a_task_free(fr->task);
  a2a_reply_free(fr->reply);
  a2a_event_free(fr->event);
  a2a_parts_free(fr->parts);
  a2a_agent_free(fr->agent);
  a2a_client_free(fr->client);
  fr->after = a2a_last_error_status();
}

static void on_reply_free(void *ud, a2a_status st, const a2a_reply *r) {
  freer *fr = ud;
  (void)r;
  fr->runs++;
  fr->status = st;
  if (fr->runs == 1) free_held(fr);
  flag_raise(&fr->f);
}

static void on_task_free(void *ud, a2a_status st, const a2a_task *t) {
  freer *fr = ud;
  (void)t;
  fr->runs++;
  fr->status = st;
  if (fr->runs == 1) free_held(fr);
  flag_raise(&fr->f);
}

static void on_event_free(void *ud, const a2a_event *ev) {
  freer *fr = ud;
  (void)ev;
  fr->runs++;
  if (fr->runs == 1) free_held(fr);
  flag_raise(&fr->f);
}

/* Owned values for a callback to free: a task, a reply, an event of `a`
 * (taken from its queue: `a` must have one), a parts builder. */
static void hold_owned(freer *fr, const a2a_agent *a, const char *task) {
  OK(a2a_agent_get_task(a, task, 0, &fr->task));
  OK(a2a_agent_list_agents(a, NULL, &fr->reply));
  OK(a2a_agent_wait_event(a, WAIT_SECONDS * 1000, &fr->event));
  fr->parts = text_parts("owned");
}

static void check_freed(freer *fr, int runs, const char *what) {
  CHECK(fr->runs == runs);
  if (fr->after == A2A_STATUS_PANIC) {
    fprintf(stderr, "%s: the frees inside the callback panicked\n", what);
    CHECK(0);
  }
  flag_destroy(&fr->f);
  printf("frees: %s\n", what);
}

/* A completion callback that polls again; the callback that inner poll
 * runs frees the client. */
typedef struct {
  a2a_client *client;
  int outer, inner;
  size_t inner_ran;
  a2a_status inner_status;
} nest;

static void on_reply_nest(void *ud, a2a_status st, const a2a_reply *r) {
  nest *n = ud;
  (void)st, (void)r;
  if (n->outer == 0) {
    n->outer++;
    n->inner_status = a2a_client_poll(n->client, 16, &n->inner_ran);
    /* the client is gone now: not used again */
  } else {
    n->inner++;
    a2a_client_free(n->client);
  }
}

static void frees(void) {
  a2a_client *rc = connect_mode(A2A_DISPATCH_THREAD, 0);
  a2a_agent *req = reg(rc, "misuse-free", "fr-req");
  freer fr;

  /* Poll mode, completion callback frees the client while no agent handle
   * is alive (the reply's agent is only borrowed): a2a_client_poll must
   * not read the freed client after the callback. */
  {
    a2a_client *pc = connect_mode(A2A_DISPATCH_POLL, 0);
    freer_init(&fr);
    fr.client = pc;
    OK(a2a_client_register_async(pc, "misuse-free", "fr-p1", NULL, A2A_DELIVERY_PUSH, on_reply_free, &fr));
    /* a second call, owed when the client goes: free runs it */
    OK(a2a_client_call_json_async(pc, "a2a.agents.list", NULL, on_reply_free, &fr));
    poll_until(pc, &fr.runs, 1);
    /* the second ran inside the free, before a2a_client_poll returned */
    check_freed(&fr, 2, "poll mode, completion callback frees the client (no agent alive)");
  }

  /* Poll mode, nested: the callback run by a poll inside a callback frees
   * the client; both polls return normally. */
  {
    a2a_client *pc = connect_mode(A2A_DISPATCH_POLL, 0);
    nest n;
    memset(&n, 0, sizeof n);
    n.client = pc;
    OK(a2a_client_call_json_async(pc, "a2a.agents.list", NULL, on_reply_nest, &n));
    OK(a2a_client_call_json_async(pc, "a2a.agents.list", NULL, on_reply_nest, &n));
    /* answered after those two on the same socket: both are queued now */
    a2a_reply *r = NULL;
    EXPECT(a2a_client_call_json(pc, "a2a.agents.list", NULL, &r), A2A_STATUS_RPC);
    size_t ran = 0;
    OK(a2a_client_poll(pc, 16, &ran));
    CHECK(ran == 1 && n.outer == 1 && n.inner == 1);
    EXPECT(n.inner_status, A2A_STATUS_OK);
    CHECK(n.inner_ran == 1);
    printf("frees: poll mode, a nested poll's callback frees the client\n");
  }

  /* Poll mode, completion callback frees its agent, owned values, then
   * the client. */
  {
    a2a_client *pc = connect_mode(A2A_DISPATCH_POLL, 0);
    a2a_agent *w = reg(pc, "misuse-free", "fr-p2");
    char *task = send_text(req, "fr-p2", "p2");
    freer_init(&fr);
    hold_owned(&fr, w, task);
    fr.agent = w, fr.client = pc;
    OK(a2a_agent_get_task_async(w, task, 0, on_task_free, &fr));
    poll_until(pc, &fr.runs, 1);
    CHECK(fr.status == A2A_STATUS_OK);
    check_freed(&fr, 1, "poll mode, completion callback frees agent, values, client");
    free(task);
  }

  /* Poll mode, event callback frees its agent (the last handle), owned
   * values and the client. */
  {
    a2a_client *pc = connect_mode(A2A_DISPATCH_POLL, 0);
    a2a_agent *w = reg(pc, "misuse-free", "fr-p3");
    char *task = send_text(req, "fr-p3", "p3 first");
    freer_init(&fr);
    hold_owned(&fr, w, task);
    fr.agent = w, fr.client = pc;
    OK(a2a_agent_set_event_cb(w, on_event_free, &fr));
    char *task2 = send_text(req, "fr-p3", "p3 second");
    poll_until(pc, &fr.runs, 1);
    check_freed(&fr, 1, "poll mode, event callback frees agent, values, client");
    free(task);
    free(task2);
  }

  /* Thread mode, completion callback (reader thread) frees the client
   * while no agent handle is alive. */
  {
    a2a_client *tc = connect_mode(A2A_DISPATCH_THREAD, 0);
    freer_init(&fr);
    fr.client = tc;
    OK(a2a_client_call_json_async(tc, "a2a.agents.list", NULL, on_reply_free, &fr));
    flag_wait(&fr.f, 1);
    CHECK(fr.status == A2A_STATUS_RPC);
    check_freed(&fr, 1, "thread mode, completion callback frees the client (no agent alive)");
  }

  /* Thread mode, completion callback frees its agent, values, client. */
  {
    a2a_client *tc = connect_mode(A2A_DISPATCH_THREAD, 0);
    a2a_agent *w = reg(tc, "misuse-free", "fr-t2");
    char *task = send_text(req, "fr-t2", "t2");
    freer_init(&fr);
    hold_owned(&fr, w, task);
    fr.agent = w, fr.client = tc;
    OK(a2a_agent_get_task_async(w, task, 0, on_task_free, &fr));
    flag_wait(&fr.f, 1);
    check_freed(&fr, 1, "thread mode, completion callback frees agent, values, client");
    free(task);
  }

  /* Thread mode, event callback (reader thread, or the ring's when asked
   * and granted) frees its agent, values and the client. */
  for (int ring = 0; ring < 2; ring++) {
    a2a_client *tc = connect_mode(A2A_DISPATCH_THREAD, ring ? 1 << 20 : 0);
    if (ring && !a2a_client_uses_event_ring(tc)) {
      printf("frees: event ring declined, its thread not tried\n");
      a2a_client_free(tc);
      continue;
    }
    const char *name = ring ? "fr-t3r" : "fr-t3";
    a2a_agent *w = reg(tc, "misuse-free", name);
    char *task = send_text(req, name, "t3 first");
    freer_init(&fr);
    hold_owned(&fr, w, task);
    fr.agent = w, fr.client = tc;
    OK(a2a_agent_set_event_cb(w, on_event_free, &fr));
    char *task2 = send_text(req, name, "t3 second");
    flag_wait(&fr.f, 1);
    check_freed(&fr, 1, ring ? "thread mode, event callback on the ring's thread frees agent, values, client"
                          : "thread mode, event callback frees agent, values, client");
    free(task);
    free(task2);
  }

  /* Thread mode, event callback on the registering thread (an event
   * queued before the callback was set) frees its agent and the client
   * while a2a_agent_set_event_cb is still running. */
  {
    a2a_client *tc = connect_mode(A2A_DISPATCH_THREAD, 0);
    a2a_agent *w = reg(tc, "misuse-free", "fr-t5");
    char *task = send_text(req, "fr-t5", "t5");
    a2a_task *t = NULL;
    /* answered after the event was read: the event is queued now */
    OK(a2a_agent_get_task(w, task, 0, &t));
    a2a_task_free(t);
    freer_init(&fr);
    fr.agent = w, fr.client = tc;
    OK(a2a_agent_set_event_cb(w, on_event_free, &fr));
    check_freed(&fr, 1, "thread mode, event callback on the registering thread frees agent, client");
    free(task);
  }

  /* Thread mode, event callback frees only its own agent; the client goes
   * later, from the main thread. */
  {
    a2a_client *tc = connect_mode(A2A_DISPATCH_THREAD, 0);
    a2a_agent *w = reg(tc, "misuse-free", "fr-t4");
    freer_init(&fr);
    fr.agent = w;
    OK(a2a_agent_set_event_cb(w, on_event_free, &fr));
    char *task = send_text(req, "fr-t4", "t4");
    flag_wait(&fr.f, 1);
    char *task2 = send_text(req, "fr-t4", "t4 after");
    a2a_client_free(tc);
    check_freed(&fr, 1, "thread mode, event callback frees its agent, the client later");
    free(task);
    free(task2);
  }

  /* A pull agent (its events fetched by a chain of a2a.events.wait calls),
   * in both modes: the event callback frees its agent and the client. */
  for (int mode = 0; mode < 2; mode++) {
    a2a_client *c = connect_mode(mode ? A2A_DISPATCH_POLL : A2A_DISPATCH_THREAD, 0);
    const char *name = mode ? "fr-pull-p" : "fr-pull-t";
    a2a_agent *w = NULL;
    OK(a2a_client_register(c, "misuse-free", name, NULL, A2A_DELIVERY_PULL, &w));
    freer_init(&fr);
    fr.agent = w, fr.client = c;
    OK(a2a_agent_set_event_cb(w, on_event_free, &fr));
    char *task = send_text(req, name, "pull");
    if (mode)
      poll_until(c, &fr.runs, 1);
    else
      flag_wait(&fr.f, 1);
    check_freed(&fr, 1, mode ? "poll mode, a pull agent's event callback frees agent, client"
                             : "thread mode, a pull agent's event callback frees agent, client");
    free(task);
  }

  a2a_agent_free(req);
  a2a_client_free(rc);
}

int main(int argc, char **argv) {
  if (argc != 3 && argc != 4) {
    fprintf(stderr, "usage: %s <socket> <secret> [null|enums|size|deadlock|frees]\n", argv[0]);
    return 2;
  }
  g_socket = argv[1];
  g_secret = argv[2];
  const char *only = argc == 4 ? argv[3] : NULL;
  setvbuf(stdout, NULL, _IOLBF, 0); /* progress survives a crash */
  alarm(600);
#define SECTION(name, fn) \
  if (!only || strcmp(only, name) == 0) fn()
  SECTION("null", nulls);
  SECTION("enums", enums);
  SECTION("size", size_first);
  SECTION("deadlock", deadlocks);
  SECTION("frees", frees);
  wait_for_other_threads_to_end();
  printf("a2a_misuse: all passed\n");
  return 0;
}
