/* The C floor of `scripts/bench`: the server commands an executed `mongolock run NAME -- true` needs, and
 * nothing else, with libmongoc, so that the one-shot run's wall time can be read against it.
 *
 *   bench-floor URI DATABASE COLLECTION NAME
 *
 * One run: connect; createIndexes program_1 (unique) on COLLECTION; insert the lock document; run `true`
 * (fork and exec, as mongolock does); findAndModify remove (the release); insert one record into
 * COLLECTION_runs (the history); destroy the client (the driver's endSessions). 5 server commands, the
 * same as mongolock's (issue 30). Exit 0, or 1 with one line on stderr naming the step that failed.
 */
#include <mongoc/mongoc.h>

#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

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

int main(int argc, char** argv) {
  if (argc != 5) {
    fprintf(stderr, "usage: bench-floor URI DATABASE COLLECTION NAME\n");
    return 2;
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
  if (!mongoc_collection_write_command_with_opts(locks, index, NULL, &reply, &error)) {
    code = fail("createIndexes", &error);
  } else if (bson_destroy(&reply), !mongoc_collection_insert_one(locks, lock, NULL, NULL, &error)) {
    code = fail("insert of the lock", &error);
  } else if (run_true() != 0) {
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
  mongoc_client_destroy(client); /* endSessions */
  mongoc_cleanup();
  return code;
}
