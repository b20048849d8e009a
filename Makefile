# vitc — Vision Transformers in C.   make [all|test|bench-ops|deps|clean] [SAN=1] [NO_OMP=1] [CUDA=1]
CC      ?= gcc
ARCH    ?= -march=native
CFLAGS  := -std=c11 -D_DEFAULT_SOURCE -Wall -Wextra -Wshadow -MMD -MP -Isrc -I/usr/include/stb
LDLIBS  := -lm
ifeq ($(WERROR),1)
  CFLAGS += -Werror
endif

ifeq ($(SAN),1)
  MODE    := san
  CFLAGS  += -O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=undefined
  LDFLAGS += -fsanitize=address,undefined
else
  MODE    := release
  # -std=c11 turns off GCC's fusing of a * b + c into one FMA instruction (GNU C's default): the
  # polynomial kernels (GELU, exp, layer norm) ran 1.4x slower without it
  CFLAGS  += -O3 $(ARCH) -ffp-contract=fast -g
endif

# ---- dependency detection: prints what it found, names the Debian package of what it did not ----
have_header = $(shell printf '\#include <$(1)>\n' | $(CC) -E -I/usr/include/stb -x c - >/dev/null 2>&1 && echo yes)
BLAS_OMP_DIR := $(firstword $(wildcard /usr/lib/*/openblas-openmp))
MISSING :=
ifeq ($(call have_header,cblas.h),yes)
  ifneq ($(BLAS_OMP_DIR),)
    FOUND += OpenBLAS(OpenMP build)
    LDFLAGS += -L$(BLAS_OMP_DIR) -Wl,-rpath,$(BLAS_OMP_DIR)
  else
    FOUND += OpenBLAS(not the OpenMP build: batched small GEMMs will oversubscribe threads)
  endif
  LDLIBS += -lopenblas
else
  MISSING += libopenblas-openmp-dev
endif
ifeq ($(call have_header,stb_image.h),yes)
  FOUND += stb_image
  LDLIBS += -lstb
else
  MISSING += libstb-dev
endif
ifeq ($(call have_header,cjson/cJSON.h),yes)
  FOUND += cJSON
  LDLIBS += -lcjson
else
  MISSING += libcjson-dev
endif
ifeq ($(NO_OMP),1)
  FOUND += no-OpenMP(NO_OMP=1)
  CFLAGS += -Wno-unknown-pragmas
else
  CFLAGS += -fopenmp -pthread
  LDFLAGS += -fopenmp -pthread
  FOUND += OpenMP
endif
ifeq ($(CUDA),1)
  $(error CUDA=1: the CUDA backend is not part of this build yet (see the CUDA issue))
endif

BUILD ?= build/$(MODE)
LIB_SRC   := $(wildcard src/*/*.c) $(wildcard models/*.c) $(wildcard models/attn/*.c)
TEST_SRC  := $(wildcard tests/*.c)
LIB_OBJ   := $(LIB_SRC:%.c=$(BUILD)/%.o)
TEST_OBJ  := $(TEST_SRC:%.c=$(BUILD)/%.o)

CLIS := train eval

FMNIST_SRC := /usr/share/datasets/fashion-mnist
FMNIST := data/fashion_mnist

# the PyTorch reference: Debian's python3-torch lives in the system python
PYTHON ?= $(shell for p in python3 /usr/bin/python3; do $$p -c 'import torch' 2>/dev/null && { echo $$p; break; }; done)

.PHONY: all test bench bench-ops deps clean check-deps demo fmnist ablations plots plot-deps parity fuzz $(CLIS)
all: check-deps $(CLIS) $(BUILD)/test_runner $(BUILD)/bench_ops $(BUILD)/bench

# the command-line tools land in the repository root (./train, ./eval), built from tools/<name>.c
$(CLIS): %: $(BUILD)/%
	cp $< $@.tmp && mv -f $@.tmp $@

$(BUILD)/train $(BUILD)/eval $(BUILD)/bench: $(BUILD)/%: $(BUILD)/tools/%.o $(BUILD)/libvitc.a
	$(CC) $(LDFLAGS) $^ -o $@ $(LDLIBS)

check-deps:
	@echo "vitc build ($(MODE)): found $(FOUND)"
ifneq ($(strip $(MISSING)),)
	@echo "error: missing Debian packages: $(MISSING)"; \
	 echo "       run 'make deps' as root, or: apt-get install $(MISSING)"; exit 1
endif

deps:
	@if [ -n "$(strip $(MISSING))" ] || ! ls /usr/lib/*/openblas-openmp >/dev/null 2>&1; then \
	  if [ "$$(id -u)" != 0 ]; then \
	    echo "error: installing packages needs root: apt-get install libopenblas-openmp-dev libstb-dev libcjson-dev"; exit 1; fi; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
	    libopenblas-openmp-dev libstb-dev libcjson-dev; \
	else echo "dependencies present: $(FOUND)"; fi

$(BUILD)/%.o: %.c Makefile | check-deps # the flags are in the Makefile
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c $< -o $@

$(BUILD)/libvitc.a: $(LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(BUILD)/test_runner: $(TEST_OBJ) $(BUILD)/libvitc.a
	$(CC) $(LDFLAGS) $^ -o $@ $(LDLIBS)

$(BUILD)/fmnist_to_png: $(BUILD)/tools/fmnist_to_png.o
	$(CC) $(LDFLAGS) $^ -o $@ $(LDLIBS)

$(BUILD)/bench_ops: $(BUILD)/tools/bench_ops.o $(BUILD)/libvitc.a
	$(CC) $(LDFLAGS) $^ -o $@ $(LDLIBS)

test: check-deps $(CLIS) $(BUILD)/test_runner
	$(BUILD)/test_runner $(T)

# vitc vs the PyTorch reference models, same run (MODELS=a,b restricts the list)
bench: check-deps $(BUILD)/bench
	MODELS=$(MODELS) tools/bench.sh

bench-ops: check-deps $(BUILD)/bench_ops
	$(BUILD)/bench_ops

# Debian's Fashion-MNIST as class folders of PNGs, and a 1000-per-class training list for the ablations
fmnist: check-deps $(BUILD)/fmnist_to_png
	@test -f $(FMNIST_SRC)/train-images-idx3-ubyte.gz || { \
	  if [ "$$(id -u)" = 0 ]; then apt-get install -y -qq dataset-fashion-mnist >/dev/null || \
	    { apt-get update -qq && apt-get install -y -qq dataset-fashion-mnist; }; \
	  else echo "error: this needs Debian's dataset-fashion-mnist: apt-get install dataset-fashion-mnist"; exit 1; fi; }
	@test -d $(FMNIST)/val || $(BUILD)/fmnist_to_png $(FMNIST_SRC) $(FMNIST)
	@test -f $(FMNIST)/train_10k.txt || { label=0; for d in $(FMNIST)/train/*/; do \
	  c=$$(basename $$d); ls $$d | sort | head -1000 | sed "s|^|train/$$c/|; s|$$| $$label|"; \
	  label=$$((label + 1)); done > $(FMNIST)/train_10k.txt; }

# the first thing to run: prepare Fashion-MNIST, train a small Agent-DeiT, evaluate it
demo: fmnist train eval
	./train --config configs/demo_fmnist.json --out checkpoints
	./eval --ckpt checkpoints/demo_fmnist/last.safetensors --data $(FMNIST)/val

# the study of docs/ablations.md (about an hour on 2 cores): sweeps/, docs/ablations/*.png and the
# tables of docs/ablations.md
ablations: fmnist train eval plot-deps
	tools/ablations.sh

# gnuplot, for tools/plot.sh: installed when missing (as root)
plot-deps:
	@command -v gnuplot >/dev/null || { \
	  if [ "$$(id -u)" = 0 ]; then apt-get install -y -qq gnuplot-nox >/dev/null || \
	    { apt-get update -qq && apt-get install -y -qq gnuplot-nox; }; \
	  else echo "error: the plots need gnuplot: apt-get install gnuplot-nox"; exit 1; fi; }

# loss and accuracy curves of the demo run (trained first if it is not there): plots/demo_*.png
plots: plot-deps
	@test -f checkpoints/demo_fmnist/metrics.jsonl || $(MAKE) demo
	tools/plot.sh --run checkpoints/demo_fmnist --out plots/demo

# regenerates the committed fixtures from the PyTorch reference models in tools/ref/
parity: check-deps $(BUILD)/test_runner
	@test -n "$(PYTHON)" || { echo "error: make parity needs PyTorch (apt-get install python3-torch)"; exit 1; }
	$(PYTHON) tools/ref/make_parity.py configs/tiny tests/fixtures/parity
	$(PYTHON) tools/ref/make_train_parity.py tests/fixtures/train_parity.safetensors
	$(BUILD)/test_runner parity

# libFuzzer runs of the checkpoint and config loaders (clang), FUZZ_SECONDS each
FUZZ_SECONDS ?= 600
FUZZ_FLAGS := -std=c11 -D_DEFAULT_SOURCE -g -O1 -fsanitize=fuzzer,address,undefined -Isrc \
              -I/usr/include/stb -fopenmp -pthread
FUZZ_LIB_SRC := $(filter-out tools/%,$(LIB_SRC))
fuzz: check-deps
	@mkdir -p build/fuzz/corpus_checkpoint build/fuzz/corpus_config
	cp tests/fixtures/converted_swin_agent.safetensors build/fuzz/corpus_checkpoint/
	cp configs/*.json configs/tiny/*.json build/fuzz/corpus_config/
	clang $(FUZZ_FLAGS) tests/fuzz/fuzz_checkpoint.c $(FUZZ_LIB_SRC) -o build/fuzz/fuzz_checkpoint $(LDLIBS) $(filter -L% -Wl%,$(LDFLAGS))
	clang $(FUZZ_FLAGS) tests/fuzz/fuzz_config.c $(FUZZ_LIB_SRC) -o build/fuzz/fuzz_config $(LDLIBS) $(filter -L% -Wl%,$(LDFLAGS))
	ASAN_OPTIONS=detect_leaks=0 build/fuzz/fuzz_checkpoint -max_total_time=$(FUZZ_SECONDS) -detect_leaks=0 -max_len=300000 -artifact_prefix=build/fuzz/ build/fuzz/corpus_checkpoint
	ASAN_OPTIONS=detect_leaks=0 build/fuzz/fuzz_config -max_total_time=$(FUZZ_SECONDS) -detect_leaks=0 -artifact_prefix=build/fuzz/ build/fuzz/corpus_config

clean:
	rm -rf build $(CLIS)

-include $(LIB_OBJ:.o=.d) $(TEST_OBJ:.o=.d) $(CLIS:%=$(BUILD)/tools/%.d) $(BUILD)/tools/bench_ops.d \
         $(BUILD)/tools/bench.d
