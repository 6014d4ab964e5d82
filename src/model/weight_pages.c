/* weight_pages.c — the page-cache probe of the weights read through a file mapping: touches every
 * 2 MiB window of every weight matrix, re-reads the windows the page cache holds in 4 KiB pages
 * so that they come back in 2 MiB ones, and tells the loader whether the weights are still mostly
 * in small pages (then it copies them into huge-page memory). The page mechanics are
 * io/filemap.c's; this file knows only which bytes are weights. */
#include "io/filemap.h"
#include "model/model.h"

int g4_weights_mapped_small(g4_model *m) {
    if (!g4_thp_enabled()) return 0;
    const long long before = g4_huge_mapped_bytes();
    if (before < 0) return 0;
    const g4_config *c = &m->cfg;
    const g4_mat *mats[2 + G4_LAYER_MATS * G4_MAX_LAYERS];
    int n = 0;
    mats[n++] = &m->embed;
    if (m->lm_head.data != m->embed.data) mats[n++] = &m->lm_head;
    for (int l = 0; l < c->n_layers; l++) {
        for (int i = 0; i < G4_LAYER_MATS; i++)
            if (g4_layer_mat(&m->layers[l], i)->data) mats[n++] = g4_layer_mat(&m->layers[l], i);   /* k_eq_v: no v */
    }
    size_t windows = 0;
    for (int i = 0; i < n; i++) windows += g4_map_touch_windows(mats[i]->data, g4_mat_bytes(mats[i]));
    m->info.huge_window_bytes = windows;
    if (windows < ((size_t)64 << 20)) return 0;   /* small models: the TLB hardly matters */
    long long after = g4_huge_mapped_bytes();
    /* Some windows came in 2 MiB pages, so this file can be mapped so: re-read the rest. (None
     * did: a filesystem without large folios, or a mapping the kernel did not align — re-reading
     * would only read the file again at every load.) */
    if (after > before && (double)(after - before) < (double)windows) {
        size_t reread = 0;
        for (int i = 0; i < n; i++) {
            size_t r = 0;
            g4_map_rehuge(mats[i]->data, g4_mat_bytes(mats[i]), &r);
            reread += r;
        }
        m->info.weights_reread_bytes = reread;
        after = g4_huge_mapped_bytes();
    }
    return (double)(after - before) < 0.9 * (double)windows;
}
