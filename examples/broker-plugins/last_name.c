/* last_name.c: a faucetsd broker plugin as a shared library, through the C
 * ABI of aqs_broker_plugin.h (docs/admin-guide.md "Broker plugins"). Like
 * the Python example, it ranks the candidate clusters by name, lexically
 * last first. Plain C with no library: a small reader walks the request's
 * JSON and keeps the clusters' names.
 *
 * Build and install (the file name without ".so" is the plugin's name):
 *   cc -shared -fPIC -O2 -I/usr/include/aqs -o last-name-c.so last_name.c
 *   install -m 0755 last-name-c.so /etc/aqs/broker-plugins/
 *   faucetsd ... --plugin-dir /etc/aqs/broker-plugins --policy plugin:last-name-c
 */
#include <stdlib.h>
#include <string.h>

#include "aqs_broker_plugin.h"

#define MAX_CLUSTERS 1024
#define MAX_NAME 128

struct reader {
  const char* p;
};

static void skip_space(struct reader* r) {
  while (*r->p == ' ' || *r->p == '\n' || *r->p == '\r' || *r->p == '\t') r->p++;
}

/* A string at r->p into out (truncated to cap - 1; escapes kept as the
 * character after the backslash, enough for names). 0 on success. */
static int read_string(struct reader* r, char* out, size_t cap) {
  size_t n = 0;
  if (*r->p != '"') return -1;
  r->p++;
  while (*r->p && *r->p != '"') {
    char c = *r->p++;
    if (c == '\\') {
      if (!*r->p) return -1;
      c = *r->p++;
    }
    if (out && n + 1 < cap) out[n++] = c;
  }
  if (*r->p != '"') return -1;
  r->p++;
  if (out) out[n] = '\0';
  return 0;
}

/* Skips any value (nested objects and arrays included). 0 on success. */
static int skip_value(struct reader* r) {
  int depth = 0;
  skip_space(r);
  if (*r->p == '"') return read_string(r, NULL, 0);
  if (*r->p != '{' && *r->p != '[') { /* a number, true, false or null */
    while (*r->p && *r->p != ',' && *r->p != '}' && *r->p != ']') r->p++;
    return 0;
  }
  do {
    if (*r->p == '"') {
      if (read_string(r, NULL, 0) != 0) return -1;
      continue;
    }
    if (*r->p == '{' || *r->p == '[') depth++;
    if (*r->p == '}' || *r->p == ']') depth--;
    if (*r->p == '\0') return -1;
    r->p++;
  } while (depth > 0);
  return 0;
}

static int by_name_descending(const void* a, const void* b) { return strcmp((const char*)b, (const char*)a); }

int aqs_broker_plugin_abi(void) { return AQS_BROKER_PLUGIN_ABI; }

char* aqs_broker_rank(const char* request) {
  static char names[MAX_CLUSTERS][MAX_NAME];
  size_t count = 0;
  char key[64];
  struct reader r = {request};
  skip_space(&r);
  if (*r.p++ != '{') return NULL;
  for (;;) {
    skip_space(&r);
    if (*r.p == '}') break;
    if (read_string(&r, key, sizeof key) != 0) return NULL;
    skip_space(&r);
    if (*r.p++ != ':') return NULL;
    skip_space(&r);
    if (strcmp(key, "clusters") == 0 && *r.p == '[') {
      r.p++;
      for (;;) {
        skip_space(&r);
        if (*r.p == ']') {
          r.p++;
          break;
        }
        if (*r.p++ != '{') return NULL;
        for (;;) {
          skip_space(&r);
          if (*r.p == '}') {
            r.p++;
            break;
          }
          if (read_string(&r, key, sizeof key) != 0) return NULL;
          skip_space(&r);
          if (*r.p++ != ':') return NULL;
          skip_space(&r);
          if (strcmp(key, "name") == 0 && count < MAX_CLUSTERS) {
            if (read_string(&r, names[count++], MAX_NAME) != 0) return NULL;
          } else if (skip_value(&r) != 0) {
            return NULL;
          }
          skip_space(&r);
          if (*r.p == ',') r.p++;
        }
        skip_space(&r);
        if (*r.p == ',') r.p++;
      }
    } else if (skip_value(&r) != 0) {
      return NULL;
    }
    skip_space(&r);
    if (*r.p == ',') r.p++;
  }
  if (count == 0) return NULL; /* no opinion: the default policy decides */
  qsort(names, count, MAX_NAME, by_name_descending);
  /* ["a","b"]: each name at most MAX_NAME - 1 characters, two quotes, a comma. */
  char* answer = malloc(count * (MAX_NAME + 3) + 3);
  if (!answer) return NULL;
  char* out = answer;
  *out++ = '[';
  for (size_t i = 0; i < count; ++i) {
    if (i) *out++ = ',';
    *out++ = '"';
    for (const char* c = names[i]; *c; ++c) {
      if (*c != '"' && *c != '\\') *out++ = *c; /* never in a cluster's name */
    }
    *out++ = '"';
  }
  *out++ = ']';
  *out = '\0';
  return answer; /* released by the host with free(): no aqs_broker_free here */
}
