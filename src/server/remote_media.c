/* remote_media.c — fetching an image_url part's http(s) URL for a server started with
 * --allow-remote-media (libcurl). Runs on the parse worker that parses the request, never on the
 * scheduler thread, so a slow origin delays only its own request. The limits: http and https
 * only (redirects included, at most a few), a byte cap checked before (Content-Length) and while
 * the body streams, a total and a connect timeout, no cookies, no credentials, no decompression
 * (the bytes are the file the decoder sees, as for a data: URL). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>

#include "server/server.h"

enum { MAX_REDIRECTS = 3, CONNECT_TIMEOUT_S = 5 };

int g4_remote_media_init(void) { return curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK ? 0 : -1; }
void g4_remote_media_cleanup(void) { curl_global_cleanup(); }

typedef struct {
    unsigned char *buf;
    size_t n, cap, max;
    int too_large, nomem;
} sink;

static size_t on_body(char *data, size_t size, size_t nmemb, void *arg) {
    sink *s = arg;
    const size_t len = size * nmemb;
    if (len > s->max - s->n) {   /* past the cap: stop the transfer now */
        s->too_large = 1;
        return 0;
    }
    if (s->n + len > s->cap) {
        size_t cap = s->cap ? s->cap : 64 << 10;
        while (cap < s->n + len) cap *= 2;
        if (cap > s->max) cap = s->max;
        unsigned char *b = realloc(s->buf, cap);
        if (!b) {
            s->nomem = 1;
            return 0;
        }
        s->buf = b;
        s->cap = cap;
    }
    memcpy(s->buf + s->n, data, len);
    s->n += len;
    return len;
}

/* Whether url names a user or password (never sent anywhere by this server). */
static int has_userinfo(const char *url) {
    CURLU *u = curl_url();
    if (!u) return 0;
    char *user = NULL;
    int has = !curl_url_set(u, CURLUPART_URL, url, 0) &&
              (!curl_url_get(u, CURLUPART_USER, &user, 0) || !curl_url_get(u, CURLUPART_PASSWORD, &user, 0));
    curl_free(user);
    curl_url_cleanup(u);
    return has;
}

int g4_remote_media_fetch(const char *url, size_t max_bytes, int timeout_s, unsigned char **out, size_t *out_n,
                          char *why, size_t why_n) {
    if (has_userinfo(url)) {
        snprintf(why, why_n, "a URL with credentials (user@host) is not fetched");
        return -1;
    }
    CURL *h = curl_easy_init();
    if (!h) return -2;
    sink s = {.max = max_bytes};
    char ua[64];
    snprintf(ua, sizeof ua, "gemma4c/%s", G4_VERSION);
    const long connect_s = timeout_s < CONNECT_TIMEOUT_S ? timeout_s : CONNECT_TIMEOUT_S;
    /* the scheme limit is the point of the exercise: no fetch without it */
#if LIBCURL_VERSION_NUM >= 0x075500   /* 7.85: the _STR forms; the bitmask forms are deprecated */
    const int schemes = curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https") == CURLE_OK &&
                        curl_easy_setopt(h, CURLOPT_REDIR_PROTOCOLS_STR, "http,https") == CURLE_OK;
#else
    const int schemes = curl_easy_setopt(h, CURLOPT_PROTOCOLS, (long)(CURLPROTO_HTTP | CURLPROTO_HTTPS)) == CURLE_OK &&
                        curl_easy_setopt(h, CURLOPT_REDIR_PROTOCOLS, (long)(CURLPROTO_HTTP | CURLPROTO_HTTPS)) == CURLE_OK;
#endif
    if (!schemes) {
        curl_easy_cleanup(h);
        snprintf(why, why_n, "this server's libcurl cannot limit a fetch to http and https");
        return -1;
    }
    if (curl_easy_setopt(h, CURLOPT_URL, url) != CURLE_OK) {
        curl_easy_cleanup(h);
        return -2;
    }
    curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 1L);
    curl_easy_setopt(h, CURLOPT_MAXREDIRS, (long)MAX_REDIRECTS);
    curl_easy_setopt(h, CURLOPT_TIMEOUT, (long)timeout_s);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT, connect_s);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);   /* threads: no SIGALRM for DNS timeouts */
    curl_easy_setopt(h, CURLOPT_MAXFILESIZE_LARGE, (curl_off_t)max_bytes);   /* a declared Content-Length */
    curl_easy_setopt(h, CURLOPT_FAILONERROR, 1L);
    curl_easy_setopt(h, CURLOPT_USERAGENT, ua);
    curl_easy_setopt(h, CURLOPT_NETRC, (long)CURL_NETRC_IGNORED);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &s);
    const CURLcode rc = curl_easy_perform(h);
    long status = 0;
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
    curl_easy_cleanup(h);
    if (rc == CURLE_OK && !s.n) snprintf(why, why_n, "the URL answered an empty body");
    else if (rc == CURLE_OK) {
        *out = s.buf;
        *out_n = s.n;
        return 0;
    }
    free(s.buf);
    if (s.nomem) return -2;
    switch (rc) {
    case CURLE_OK: break;   /* empty */
    case CURLE_WRITE_ERROR:
    case CURLE_FILESIZE_EXCEEDED:
        snprintf(why, why_n, "the image is larger than %zu bytes (--remote-media-max-bytes)", max_bytes);
        break;
    case CURLE_HTTP_RETURNED_ERROR: snprintf(why, why_n, "the URL answered HTTP %ld", status); break;
    case CURLE_OPERATION_TIMEDOUT:
        snprintf(why, why_n, "no complete answer within %d s (--remote-media-timeout)", timeout_s);
        break;
    case CURLE_UNSUPPORTED_PROTOCOL: snprintf(why, why_n, "only http and https URLs are fetched (redirects too)"); break;
    case CURLE_TOO_MANY_REDIRECTS: snprintf(why, why_n, "more than %d redirects", MAX_REDIRECTS); break;
    case CURLE_COULDNT_RESOLVE_HOST: snprintf(why, why_n, "the host name does not resolve"); break;
    case CURLE_COULDNT_CONNECT: snprintf(why, why_n, "could not connect to the host"); break;
    default: snprintf(why, why_n, "%s", curl_easy_strerror(rc)); break;
    }
    return -1;
}
