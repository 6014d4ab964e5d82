/* mtp.h — Gemma 4's MTP drafter (transformers' Gemma4UnifiedAssistantForCausalLM) beside a loaded
 * target: a small Gemma 4 text stack whose every layer reuses the KV of the target's last sliding
 * and last full-attention layer, fed the target's embedding of the newest token and its final
 * hidden state, drafting several tokens from one position (transformers'
 * SinglePositionMultiTokenCandidateGenerator). */
#ifndef G4_MTP_H
#define G4_MTP_H

#include "generate/draft.h"

typedef struct g4_mtp g4_mtp;

/* Loads the HF directory `dir` (config.json, model.safetensors, optional generation_config.json)
 * and checks it against `target` (vocabulary, backbone width, head counts and sizes per layer
 * type, sliding window). The target is a Gemma 4 model on one rank or a --tp N group, whose
 * sliding rings hold at least window + 1 positions (prefill_chunk >= 2). The drafter runs whole on
 * rank 0 and reads each KV head and embedding row from the rank holding it: in this process on the
 * threads backend; under MPI each round gathers the rows it attends to of the heads other ranks
 * hold, and each step the embedding row another rank holds (parallel/group.h). */
g4_status g4_mtp_load(const char *dir, g4_model *target, g4_mtp **out);
void g4_mtp_free(g4_mtp *d);
/* generation_config.json's num_assistant_tokens (transformers' default 20 when absent) */
int g4_mtp_default_k(const g4_mtp *d);
int g4_mtp_vocab(const g4_mtp *d);

/* One round as transformers drafts it: up to max_draft tokens, all from position n - 1, each step
 * fed the previous step's token and projected hidden state. logits: NULL or [max_draft][vocab],
 * each step's drafter logits. Returns the number drafted, or -1 (g4_fail message set). */
int g4_mtp_draft(g4_mtp *d, const g4_draft_ctx *c, int max_draft, int32_t *out, float *logits);

/* The drafter interface over g4_mtp_load: g4_drafter_mtp_new (gemma4c.h). */

#endif
