/* The C floor of `scripts/bench`: the server commands an executed `mongolock run NAME -- true` needs, and
 * nothing else, with libmongoc, so that the one-shot run's wall time can be read against it.
 *
 *   bench-floor URI DATABASE COLLECTION NAME [--contract]
 *
 * One run: connect; listIndexes of COLLECTION, and createIndexes program_1 (unique) only when no index is on
 * {program: 1} (the first run); insert the lock document; run `true` (fork and exec, as mongolock does);
 * findAndModify remove (the release); insert one record into COLLECTION_runs (the history); destroy the
 * client (the driver's endSessions). 5 server commands, the same as mongolock's (issue 30). Exit 0, or 1 with one
 * line on stderr naming the step that failed.
 *
 * --contract: also what an executed run does on this host by contract (the man page), not by choice:
 * its holder file (/dev/shm, made with O_EXCL and flock'ed before the acquisition, the job's process group
 * written into it, unlinked at the end: the same-host takeover's evidence), a guardian process between it
 * and the job (forked; it forks the job and waits for it, so that a watchdog outside mongolock could stop
 * the job: the guardian's contract), and the job's own cgroup (mkdir below this process's cgroup2 group,
 * the job cloned into it with clone3 CLONE_INTO_CGROUP, rmdir at the end) where the host allows one.
 * Nothing else of mongolock's (no watchdog timer, control socket, heartbeat, signal handling).
 */
#include <mongoc/mongoc.h>

#include <fcntl.h>
#include <linux/sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

/* Whether listIndexes of `locks` shows an index keyed {program: 1} (0 also when the collection is new). */
static int has_program_index(mongoc_collection_t* locks) {
  mongoc_cursor_t* cursor = mongoc_collection_find_indexes_with_opts(locks, NULL);
  const bson_t* spec = NULL;
  int found = 0;
  while (mongoc_cursor_next(cursor, &spec)) {
    bson_iter_t it;
    found = found || (bson_iter_init_find(&it, spec, "name") && strcmp(bson_iter_utf8(&it, NULL), "program_1") == 0);
  }
  mongoc_cursor_destroy(cursor);
  return found;
}

static int fail(const char* step, const bson_error_t* error) {
  fprintf(stderr, "bench-floor: error: %s: %s\n", step, error->message);
  return 1;
}

static int run_true(void) {
  const pid_t pid = fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    execlp("true", "true", (char*)NULL);
    _exit(127);
  }
  int status = 0;
  if (waitpid(pid, &status, 0) < 0) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* The directory of this process's cgroup2 group ("" when there is none): the cgroup2 mount point from
 * /proc/self/mountinfo, then the "0::" line of /proc/self/cgroup. */
static void own_cgroup(char* dir, size_t size) {
  char line[4096], mount[1024] = "";
  dir[0] = 0;
  FILE* in = fopen("/proc/self/mountinfo", "re");
  while (in && fgets(line, sizeof line, in)) {
    char root[1024], point[1024];
    const char* dash = strstr(line, " - cgroup2 ");
    if (dash && sscanf(line, "%*s %*s %*s %1023s %1023s", root, point) == 2 && strcmp(root, "/") == 0) {
      snprintf(mount, sizeof mount, "%s", point);
      break;
    }
  }
  if (in) fclose(in);
  in = fopen("/proc/self/cgroup", "re");
  while (mount[0] && in && fgets(line, sizeof line, in)) {
    if (strncmp(line, "0::/", 4) != 0) continue;
    line[strcspn(line, "\n")] = 0;
    const int n = snprintf(dir, size, "%s%s", mount, strcmp(line + 3, "/") == 0 ? "" : line + 3);
    if (n < 0 || (size_t)n >= size) dir[0] = 0; /* too long: no cgroup */
    break;
  }
  if (in) fclose(in);
}

/* --contract's job start: a guardian (forked) starts `true` in the job's cgroup (`cgroup_fd` >= 0) or with
 * fork, writes the job's process group into the holder file, waits for the job and exits with its status. */
static int run_true_guarded(int holder_fd, int cgroup_fd) {
  const pid_t guardian = fork();
  if (guardian < 0) return -1;
  if (guardian == 0) {
    setpgid(0, 0);
    char text[32];
    const int n = snprintf(text, sizeof text, "%d\n", (int)getpid());
    if (pwrite(holder_fd, text, (size_t)n, 0) != n) _exit(126);
    struct clone_args args = {.flags = CLONE_INTO_CGROUP, .exit_signal = SIGCHLD, .cgroup = (unsigned)cgroup_fd};
    const pid_t job = cgroup_fd >= 0 ? (pid_t)syscall(SYS_clone3, &args, sizeof args) : fork();
    if (job < 0) _exit(126);
    if (job == 0) {
      execlp("true", "true", (char*)NULL);
      _exit(127);
    }
    int status = 0;
    if (waitpid(job, &status, 0) < 0) _exit(126);
    _exit(WIFEXITED(status) ? WEXITSTATUS(status) : 126);
  }
  int status = 0;
  if (waitpid(guardian, &status, 0) < 0) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* --contract: the holder file, made and locked before the acquisition (-1 when it cannot be). */
static int open_holder_file(char* path, size_t size) {
  snprintf(path, size, "/dev/shm/bench-floor-run-%d.lock", (int)getpid());
  const int fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (fd >= 0 && flock(fd, LOCK_EX | LOCK_NB) != 0) {
    close(fd);
    unlink(path);
    return -1;
  }
  return fd;
}

/* --contract: the job's own cgroup below this process's group; its directory fd, or -1 (path[0] = 0) where
 * the host has none to give. */
static int make_job_cgroup(char* path, size_t size) {
  char own[2048];
  own_cgroup(own, sizeof own);
  path[0] = 0;
  if (!own[0]) return -1;
  const int n = snprintf(path, size, "%s/bench-floor-job-%d", own, (int)getpid());
  if (n < 0 || (size_t)n >= size || mkdir(path, 0755) != 0) {
    path[0] = 0;
    return -1;
  }
  const int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) {
    rmdir(path);
    path[0] = 0;
  }
  return fd;
}

int main(int argc, char** argv) {
  const int contract = argc == 6 && strcmp(argv[5], "--contract") == 0;
  if (argc != 5 && !contract) {
    fprintf(stderr, "usage: bench-floor URI DATABASE COLLECTION NAME [--contract]\n");
    return 2;
  }
  char holder_path[256] = "", cgroup_path[4096] = "";
  const int holder_fd = contract ? open_holder_file(holder_path, sizeof holder_path) : -1;
  if (contract && holder_fd < 0) {
    fprintf(stderr, "bench-floor: error: cannot make the holder file %s\n", holder_path);
    return 1;
  }
  const char *database = argv[2], *name = argv[4];
  char runs_name[256];
  snprintf(runs_name, sizeof runs_name, "%s_runs", argv[3]);
  mongoc_init();
  bson_error_t error;
  mongoc_client_t* client = mongoc_client_new(argv[1]);
  if (!client) {
    fprintf(stderr, "bench-floor: error: bad URI\n");
    return 1;
  }
  mongoc_collection_t* locks = mongoc_client_get_collection(client, database, argv[3]);
  mongoc_collection_t* runs = mongoc_client_get_collection(client, database, runs_name);
  int code = 0;

  bson_t* index = BCON_NEW("createIndexes", BCON_UTF8(argv[3]), "indexes", "[", "{", "key", "{", "program",
                           BCON_INT32(1), "}", "name", BCON_UTF8("program_1"), "unique", BCON_BOOL(true), "}", "]");
  bson_oid_t id;
  bson_oid_init(&id, NULL);
  const int64_t now = (int64_t)time(NULL) * 1000;
  bson_t* lock = BCON_NEW("_id", BCON_OID(&id), "program", BCON_UTF8(name), "name", BCON_UTF8(name), "process",
                          BCON_UTF8("floor:1"), "token", BCON_UTF8("0123456789abcdef0123456789abcdef"), "acquired_at",
                          BCON_DATE_TIME(now), "expires_at", BCON_DATE_TIME(now + 60000), "renewed_at",
                          BCON_DATE_TIME(now), "ttl_ms", BCON_INT64(60000));
  bson_t* release = BCON_NEW("program", BCON_UTF8(name), "_id", BCON_OID(&id), "token",
                             BCON_UTF8("0123456789abcdef0123456789abcdef"));
  bson_t* record = BCON_NEW("name", BCON_UTF8(name), "process", BCON_UTF8("floor:1"), "outcome", BCON_UTF8("ok"),
                            "ended_at", BCON_DATE_TIME(now), "exit_code", BCON_INT32(0));
  bson_t reply;
  bson_init(&reply);
  if (!has_program_index(locks) && !mongoc_collection_write_command_with_opts(locks, index, NULL, &reply, &error)) {
    code = fail("createIndexes", &error);
  } else if (bson_destroy(&reply), !mongoc_collection_insert_one(locks, lock, NULL, NULL, &error)) {
    code = fail("insert of the lock", &error);
  } else if ((contract ? run_true_guarded(holder_fd, make_job_cgroup(cgroup_path, sizeof cgroup_path)) : run_true()) !=
             0) {
    fprintf(stderr, "bench-floor: error: `true` did not exit 0\n");
    code = 1;
  } else if (!mongoc_collection_find_and_modify(locks, release, NULL, NULL, NULL, true, false, false, &reply, &error)) {
    code = fail("findAndModify (the release)", &error);
  } else if (bson_destroy(&reply), !mongoc_collection_insert_one(runs, record, NULL, NULL, &error)) {
    code = fail("insert of the run record", &error);
  }
  bson_destroy(index);
  bson_destroy(lock);
  bson_destroy(release);
  bson_destroy(record);
  mongoc_collection_destroy(locks);
  mongoc_collection_destroy(runs);
  if (cgroup_path[0]) rmdir(cgroup_path); /* the job has ended: the group is empty */
  if (holder_fd >= 0) {
    unlink(holder_path);
    close(holder_fd);
  }
  mongoc_client_destroy(client); /* endSessions */
  mongoc_cleanup();
  return code;
}
