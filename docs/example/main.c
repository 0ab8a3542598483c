/* docs/example/main.c: the smallest program that uses an hloc-compiled model.
 *
 * frozen_mlp.pb is a 2-layer MLP with its weights baked in as constants (exported by JAX);
 * `hloc frozen_mlp.pb -o model.o` turns it into model.o + model.h. This program fills the
 * input with deterministic values, runs the model on the calling thread and prints the
 * log-probabilities of each row and its arg-max. */
#include "model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

int main(void) {
  static float x[4][64];
  static float y[4][10];
  for (int i = 0; i < 4; i++)
    for (int j = 0; j < 64; j++)
      x[i][j] = sinf(0.1f * (float)(i * 64 + j));
  const void *args[MODEL_NUM_ARGS] = {x};
  void *results[MODEL_NUM_RESULTS] = {y};
  void *temp = aligned_alloc(64, MODEL_TEMP_BYTES ? (MODEL_TEMP_BYTES + 63) / 64 * 64 : 64);
  int rc = model_run(args, results, temp);
  free(temp);
  if (rc != 0) {
    fprintf(stderr, "model_run failed: %d\n", rc);
    return 1;
  }
  for (int i = 0; i < 4; i++) {
    int best = 0;
    printf("row %d:", i);
    for (int j = 0; j < 10; j++) {
      printf(" %7.3f", y[i][j]);
      if (y[i][j] > y[i][best]) best = j;
    }
    printf("  -> class %d\n", best);
  }
  return 0;
}
