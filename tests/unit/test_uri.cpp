#include <doctest/doctest.h>

#include <mongolock/error.hpp>
#include <mongolock/uri.hpp>

#include <string>

using namespace mongolock;
using namespace std::string_literals;

TEST_SUITE_BEGIN("Uri");

TEST_CASE("Redaction replaces the password and keeps everything else") {
  CHECK(redact_uri("mongodb://alice:s3cret@db1.example.com:27017/locks") ==
        "mongodb://alice:***@db1.example.com:27017/locks");
  CHECK(redact_uri("mongodb://alice:s3cret@localhost") == "mongodb://alice:***@localhost");
  CHECK(redact_uri("mongodb+srv://alice:s3cret@cluster0.example.net/?retryWrites=true") ==
        "mongodb+srv://alice:***@cluster0.example.net/?retryWrites=true");
  CHECK(redact_uri("mongodb://alice:s3cret@h1:27017,h2:27018,h3/?replicaSet=rs0") ==
        "mongodb://alice:***@h1:27017,h2:27018,h3/?replicaSet=rs0");
  CHECK(redact_uri("mongodb://:s3cret@localhost") == "mongodb://:***@localhost");
  CHECK(redact_uri("mongodb://alice:s3cret@[::1]:27017/db") == "mongodb://alice:***@[::1]:27017/db");
}

TEST_CASE("Redaction leaves a URI without a password unchanged") {
  std::string uri;
  SUBCASE("no userinfo") { uri = "mongodb://localhost:27017/locks"; }
  SUBCASE("no userinfo, no port") { uri = "mongodb://localhost"; }
  SUBCASE("user only") { uri = "mongodb://alice@localhost:27017/locks"; }
  SUBCASE("user only, x509 style") { uri = "mongodb://CN%3Dclient@localhost/?authMechanism=MONGODB-X509"; }
  SUBCASE("empty password") { uri = "mongodb://alice:@localhost"; }
  SUBCASE("IPv6 host") { uri = "mongodb://[::1]:27017/db"; }
  SUBCASE("'@' and ':' only in the query") { uri = "mongodb://localhost:27017/?appName=a:b@c"; }
  SUBCASE("'@' and ':' in the query, no path") { uri = "mongodb://localhost?appName=a:b@c"; }
  SUBCASE("'@' and ':' in the fragment") { uri = "mongodb://localhost#a:b@c"; }
  SUBCASE("unix socket host") { uri = "mongodb://%2Ftmp%2Fmongodb-27017.sock/locks"; }
  CAPTURE(uri);
  CHECK(redact_uri(uri) == uri);
  CHECK(uri_password(uri) == "");
}

TEST_CASE("A password may contain unescaped '@' and ':'") {
  SUBCASE("'@'") {
    CHECK(redact_uri("mongodb://alice:p@ss@localhost/db") == "mongodb://alice:***@localhost/db");
    CHECK(uri_password("mongodb://alice:p@ss@localhost/db") == "p@ss");
  }
  SUBCASE("':'") {
    CHECK(redact_uri("mongodb://alice:pa:ss@localhost:27017") == "mongodb://alice:***@localhost:27017");
    CHECK(uri_password("mongodb://alice:pa:ss@localhost:27017") == "pa:ss");
  }
  SUBCASE("both, several times, with a query holding '@'") {
    const auto uri = "mongodb://alice:a@b:c@d@h1,h2/?appName=x@y"s;
    CHECK(redact_uri(uri) == "mongodb://alice:***@h1,h2/?appName=x@y");
    CHECK(uri_password(uri) == "a@b:c@d");
  }
}

TEST_CASE("Percent-escaped passwords are redacted as written and decoded on request") {
  const auto uri = "mongodb://alice:p%40ss%3Aw%2Fo%25rd@localhost/?authSource=admin"s;
  CHECK(redact_uri(uri) == "mongodb://alice:***@localhost/?authSource=admin");
  CHECK(uri_password(uri) == "p@ss:w/o%rd");
}

TEST_CASE("Password decoding handles case and broken escapes") {
  CHECK(uri_password("mongodb://u:%2f%2F@h") == "//");
  CHECK(uri_password("mongodb://u:abc%41@h") == "abcA");
  CHECK(uri_password("mongodb://u:%41@h") == "A");
  CHECK(uri_password("mongodb://u:100%@h") == "100%");
  CHECK(uri_password("mongodb://u:%4@h") == "%4");
  CHECK(uri_password("mongodb://u:%zz@h") == "%zz");
  CHECK(uri_password("mongodb://u:%%41@h") == "%A");
  CHECK(uri_password("mongodb://u:a+b@h") == "a+b");
  CHECK(uri_password("mongodb://u:%C3%A9@h") == "\xc3\xa9");
  CHECK(uri_password("mongodb://u:%00x@h") == "\0x"s);
}

TEST_CASE("Malformed URIs never throw") {
  std::string uri;
  SUBCASE("empty") { uri = ""; }
  SUBCASE("no scheme") { uri = "localhost:27017"; }
  SUBCASE("no scheme, with userinfo") { uri = "alice:s3cret@localhost"; }
  SUBCASE("scheme only") { uri = "mongodb://"; }
  SUBCASE("scheme and '@' only") { uri = "mongodb://@"; }
  SUBCASE("scheme, ':' and '@' only") { uri = "mongodb://:@"; }
  SUBCASE("'://' at the very end") { uri = "x://"; }
  SUBCASE("bare '://'") { uri = "://"; }
  SUBCASE("'@' right after the scheme") { uri = "mongodb://@host"; }
  SUBCASE("path right after the scheme") { uri = "mongodb:///a:b@c"; }
  SUBCASE("'@' before the scheme") { uri = "a:b@mongodb://host"; }
  SUBCASE("trailing '%'") { uri = "mongodb://u:p%@h"; }
  SUBCASE("binary junk") { uri = "\xff\0://:\xfe@"s; }
  CAPTURE(uri);
  CHECK_NOTHROW((void)redact_uri(uri));
  CHECK_NOTHROW((void)uri_password(uri));
  CHECK_NOTHROW((void)scrub_secrets("message " + uri, uri));
}

TEST_CASE("Malformed URIs with a password still have it redacted") {
  CHECK(redact_uri("mongodb://:@") == "mongodb://:@");
  CHECK(redact_uri("mongodb://u:p%@h") == "mongodb://u:***@h");
  CHECK(redact_uri("mongodb://u:pw@") == "mongodb://u:***@");
  CHECK(redact_uri("foo://u:pw@") == "foo://u:***@");
}

// A URI whose "mongodb://" is missing or mistyped is the commonest malformed --uri. The driver refuses it and
// mongo_store quotes redact_uri(uri) in "invalid --uri '...'": without "://" the password must still be
// found, or "alice:s3cret@..." would be printed.
TEST_CASE("A password is hidden even when the scheme is missing or mistyped") {
  std::string uri;
  SUBCASE("no scheme") { uri = "alice:s3cret@localhost:27017/locks"; }
  SUBCASE("one slash") { uri = "mongodb:/alice:s3cret@localhost"; }
  SUBCASE("no slashes") { uri = "mongodb:alice:s3cret@localhost"; }
  CAPTURE(uri);
  CHECK(redact_uri(uri).find("s3cret") == std::string::npos);
  CHECK(uri_password(uri) == "s3cret");
  const auto printed = scrub_secrets("invalid --uri '" + redact_uri(uri) + "': Invalid URI Schema", uri);
  CAPTURE(printed);
  CHECK(printed.find("s3cret") == std::string::npos);
}

TEST_CASE("Scrubbing replaces the password as written") {
  const auto uri = "mongodb://alice:s3cret@localhost/locks"s;
  CHECK(scrub_secrets("Authentication failed for password s3cret", uri) == "Authentication failed for password ***");
  CHECK(scrub_secrets("s3cret s3cret s3cret", uri) == "*** *** ***");
  CHECK(scrub_secrets("s3crets3cret", uri) == "******");
}

TEST_CASE("Scrubbing replaces the percent-decoded password too") {
  const auto uri = "mongodb://alice:p%40ss%3Aword@localhost/locks"s;
  CHECK(scrub_secrets("bad password 'p@ss:word'", uri) == "bad password '***'");
  CHECK(scrub_secrets("bad password 'p%40ss%3Aword'", uri) == "bad password '***'");
  const auto both = scrub_secrets("raw p%40ss%3Aword decoded p@ss:word", uri);
  CHECK(both == "raw *** decoded ***");
}

TEST_CASE("Scrubbing replaces the whole URI by its redacted form") {
  const auto uri = "mongodb://alice:s3cret@db1:27017/locks?authSource=admin"s;
  CHECK(scrub_secrets("cannot reach " + uri + ": timeout", uri) ==
        "cannot reach mongodb://alice:***@db1:27017/locks?authSource=admin: timeout");
  CHECK(scrub_secrets(uri + " " + uri, uri) == redact_uri(uri) + " " + redact_uri(uri));

  SUBCASE("with a password that is also a substring of the rest of the URI") {
    const auto tricky = "mongodb://admin:admin@localhost/admin"s;
    const auto scrubbed = scrub_secrets("connecting to " + tricky, tricky);
    CHECK(scrubbed.find("admin@") == std::string::npos);
    CHECK(scrubbed.find(":admin") == std::string::npos);
    CHECK(scrubbed.starts_with("connecting to mongodb://"));
  }
}

TEST_CASE("Scrubbing never leaves a password in the message") {
  for (const auto& uri : {"mongodb://u:hunter2@h"s, "mongodb://u:p@ss@h/db"s, "mongodb://u:p%2Fw%40d@h/?x=1"s,
                          "mongodb+srv://u:pa:ss@cluster/"s}) {
    CAPTURE(uri);
    const auto password = uri_password(uri);
    REQUIRE_FALSE(password.empty());
    const auto scrubbed = scrub_secrets("uri " + uri + " password " + password + " end", uri);
    CAPTURE(scrubbed);
    CHECK(scrubbed.find(password) == std::string::npos);
    CHECK(scrubbed.find(uri) == std::string::npos);
    CHECK(scrubbed.find(redact_uri(uri)) != std::string::npos);
  }
}

TEST_CASE("Scrubbing leaves messages without secrets unchanged") {
  const auto uri = "mongodb://alice:s3cret@localhost/locks"s;
  CHECK(scrub_secrets("No suitable servers found", uri) == "No suitable servers found");
  CHECK(scrub_secrets("", uri) == "");
  CHECK(scrub_secrets("alice at localhost", uri) == "alice at localhost");
  CHECK(scrub_secrets("already redacted: " + redact_uri(uri), uri) == "already redacted: " + redact_uri(uri));

  SUBCASE("URI without a password") {
    const auto plain = "mongodb://localhost/locks"s;
    CHECK(scrub_secrets("cannot reach " + plain, plain) == "cannot reach " + plain);
  }
  SUBCASE("empty URI") { CHECK(scrub_secrets("some message", "") == "some message"); }
}

TEST_CASE("A password with an unescaped '?' or '#' is hidden, as libmongoc reads it") {
  std::string uri;
  SUBCASE("question mark") { uri = "mongodb://alice:S3cr?et@127.0.0.1:27017/"; }
  SUBCASE("hash") { uri = "mongodb://alice:S3cr#et@127.0.0.1:27017/"; }
  CAPTURE(uri);
  CHECK(redact_uri(uri) == "mongodb://alice:***@127.0.0.1:27017/");
  CHECK(scrub_secrets("at " + uri + " with S3cr", uri).find("S3cr?et") == std::string::npos);
}

TEST_CASE("Secret URI options are hidden, others are kept") {
  const std::string uri = "mongodb://h/?tls=true&tlsCertificateKeyFilePassword=KEYPASS99&appName=x"
                          "&authMechanismProperties=AWS_SESSION_TOKEN:SESSTOK99&SSLClientCertificateKeyPassword=Z9";
  const auto redacted = redact_uri(uri);
  CHECK(redacted == "mongodb://h/?tls=true&tlsCertificateKeyFilePassword=***&appName=x"
                    "&authMechanismProperties=***&SSLClientCertificateKeyPassword=***");
  const auto message = scrub_secrets("token SESSTOK99, key KEYPASS99, AWS_SESSION_TOKEN%3ASESSTOK99", uri);
  CHECK(message.find("KEYPASS99") == std::string::npos);
  CHECK(message.find("SESSTOK99") == std::string::npos);
}

TEST_SUITE_END();

TEST_SUITE_BEGIN("UriText");

TEST_CASE("redact_text redacts the password of every URI in a text, of any scheme") {
  CHECK(redact_text("The following argument was not expected: mongodb://admin:S3cretPW@127.0.0.1:1") ==
        "The following argument was not expected: mongodb://admin:***@127.0.0.1:1");
  CHECK(redact_text("--uri=mongodb://a:pw1@h1 and 'postgres://b:pw2@h2/db'; x") ==
        "--uri=mongodb://a:***@h1 and 'postgres://b:***@h2/db'; x");
  CHECK(redact_text("mongodb+srv://u:p@c.example.net/?tlsCertificateKeyFilePassword=k") ==
        "mongodb+srv://u:***@c.example.net/?tlsCertificateKeyFilePassword=***");
  CHECK(redact_text("at mongodb://u:pa'ss\"w@h\tnext") == "at mongodb://u:***@h\tnext");
  CHECK(redact_text("no URI here: user:pw@host") == "no URI here: user:pw@host");
  CHECK(redact_text("mongodb://h:27017 is fine") == "mongodb://h:27017 is fine");
  CHECK(redact_text("://x:y@z") == "://x:***@z");
  CHECK(redact_text("") == "");
}

TEST_CASE("The URI's source: command line > environment > config file, uri or uri-file in each") {
  // Every combination of the three layers, each giving nothing, a URI, a file or both.
  enum Give { nothing, uri, file, both };
  const auto layer = [](Give give, const std::string& tag) {
    UriLayer l;
    if (give == uri || give == both) l.uri = "mongodb://" + tag;
    if (give == file || give == both) l.uri_file = "/" + tag;
    return l;
  };
  const char* names[] = {"command line", "environment", "config file"};
  const char* settings[3][2] = {{"--uri", "--uri-file"}, {"MONGOLOCK_URI", "MONGOLOCK_URI_FILE"}, {"uri", "uri-file"}};
  int combinations = 0;
  for (const Give c : {nothing, uri, file, both}) {
    for (const Give e : {nothing, uri, file, both}) {
      for (const Give f : {nothing, uri, file, both}) {
        ++combinations;
        CAPTURE(c);
        CAPTURE(e);
        CAPTURE(f);
        const Give gives[] = {c, e, f};
        if (c == both || e == both || f == both) {
          CHECK_THROWS_AS((void)choose_uri_source(layer(c, "cmd"), layer(e, "env"), layer(f, "file")), Error);
          continue;
        }
        const auto source = choose_uri_source(layer(c, "cmd"), layer(e, "env"), layer(f, "file"));
        int winner = -1;
        for (int i = 0; i < 3 && winner < 0; ++i) {
          if (gives[i] != nothing) winner = i;
        }
        if (winner < 0) {
          CHECK(source.kind == UriSource::Kind::none);
          continue;
        }
        const std::string tag = winner == 0 ? "cmd" : winner == 1 ? "env" : "file";
        CHECK(source.layer == names[winner]);
        CHECK(source.setting == settings[winner][gives[winner] == uri ? 0 : 1]);
        if (gives[winner] == uri) {
          CHECK(source.kind == UriSource::Kind::uri);
          CHECK(source.value == "mongodb://" + tag);
        } else {
          CHECK(source.kind == UriSource::Kind::uri_file);
          CHECK(source.value == "/" + tag);
        }
      }
    }
  }
  CHECK(combinations == 64);
}

TEST_CASE("Both in one layer names the layer and the two settings") {
  const UriLayer both{"mongodb://h", "/f"};
  CHECK_THROWS_WITH_AS((void)choose_uri_source({}, both, {}),
                       "MONGOLOCK_URI and MONGOLOCK_URI_FILE both given (environment); give one of them: the URI or "
                       "the file that holds it",
                       Error);
  CHECK_THROWS_WITH_AS((void)choose_uri_source({"mongodb://x", {}}, {}, both),
                       "uri and uri-file both given (config file); give one of them: the URI or the file that holds it",
                       Error);
}

TEST_SUITE_END();
