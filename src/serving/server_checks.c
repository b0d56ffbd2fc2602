/*
 * serving/server_checks.c - the checks a request passes before the server
 * reads it (server.c calls them once the headers are in): the Host allow-list
 * of loopback binds (DNS rebinding), the CORS origin, the API key (compared in
 * constant time, never logged), Content-Type: application/json on POSTs.
 */
#include "serving/server_int.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <string.h>
#include <strings.h>

int frt_host_is_loopback(const char *host)
{
    if (!host || !*host) return 1; /* the default bind is 127.0.0.1 */
    struct in_addr a4;
    struct in6_addr a6;
    if (inet_pton(AF_INET, host, &a4) == 1) return (ntohl(a4.s_addr) >> 24) == 127;
    if (inet_pton(AF_INET6, host, &a6) == 1) return IN6_IS_ADDR_LOOPBACK(&a6);
    return !strcasecmp(host, "localhost");
}

/* The request's Origin is allowed to read the answer (--cors-origin). */
int frt_server_origin_allowed(const frt_server *s, const char *origin)
{
    return origin && s->cors_origin && (!strcmp(s->cors_origin, "*") || !strcmp(s->cors_origin, origin));
}

void frt_server_cors_headers(frt_server *s, struct MHD_Connection *c, struct MHD_Response *r)
{
    const char *origin = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Origin");
    if (frt_server_origin_allowed(s, origin)) {
        MHD_add_response_header(r, "Access-Control-Allow-Origin", !strcmp(s->cors_origin, "*") ? "*" : origin);
        MHD_add_response_header(r, "Vary", "Origin");
    }
}

/* Compares in time that depends on the key's length only. */
static int key_equal(const char *given, size_t gl, const char *key, size_t kl)
{
    unsigned char d = gl != kl;
    for (size_t i = 0; i < kl; i++) d |= (unsigned char)(key[i] ^ (i < gl ? given[i] : 0));
    return d == 0;
}

int frt_server_authorized(const frt_server *s, struct MHD_Connection *c)
{
    if (!s->api_key) return 1;
    const char *h = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
    if (!h || strncasecmp(h, "Bearer ", 7)) return 0;
    h += 7;
    while (*h == ' ') h++;
    return key_equal(h, strlen(h), s->api_key, strlen(s->api_key));
}

/* Loopback binds answer only Host names of this machine (DNS rebinding). */
int frt_server_host_allowed(const frt_server *s, struct MHD_Connection *c)
{
    if (!s->loopback) return 1;
    const char *h = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_HOST);
    if (!h) return 1; /* HTTP/1.0 without Host: not a browser */
    char name[256];
    size_t n = 0;
    if (h[0] == '[') {
        const char *e = strchr(h, ']');
        n = e ? (size_t)(e - h) + 1 : strlen(h);
    } else {
        n = strcspn(h, ":");
    }
    if (n == 0 || n >= sizeof name) return 0;
    memcpy(name, h, n);
    name[n] = 0;
    static const char *const local[] = {"localhost", "127.0.0.1", "[::1]"};
    for (size_t i = 0; i < sizeof local / sizeof local[0]; i++)
        if (!strcasecmp(name, local[i])) return 1;
    for (int i = 0; i < s->n_allowed_hosts; i++)
        if (!strcasecmp(name, s->allowed_hosts[i])) return 1;
    /* the bind address itself (127.0.0.2, ::1 written without brackets in --host) */
    size_t bl = s->bind_host ? strlen(s->bind_host) : 0;
    if (bl && (!strcasecmp(name, s->bind_host) ||
               (name[0] == '[' && n == bl + 2 && !strncasecmp(name + 1, s->bind_host, bl))))
        return 1;
    return 0;
}

/* Content-Type is application/json (parameters such as charset allowed). */
int frt_server_json_content_type(struct MHD_Connection *c)
{
    const char *t = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_TYPE);
    if (!t) return 0;
    while (*t == ' ') t++;
    size_t n = strlen("application/json");
    return !strncasecmp(t, "application/json", n) && (t[n] == 0 || t[n] == ';' || t[n] == ' ');
}
