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
  # polynomial kernels (GELU, exp, layer norm) ran 1.4x slower without it. Without AVX-512's masked
  # operations GCC if-converts a loop's conditional float arithmetic only when it may assume that
  # floating point does not trap: on AVX2 GELU and softmax's exp stayed scalar (GELU 14% of a DeiT
  # inference); nothing here reads the floating-point exception flags.
  CFLAGS  += -O3 $(ARCH) -ffp-contract=fast -fno-trapping-math -g
endif

# ---- dependencies: tools/deps.sh lists the Debian packages, probes them (a header must compile, a
# library link) and installs what is missing when run as root (APT=echo shows the command instead).
# Every build goal needs the build group; test, demo, plots, fuzz, parity and bench add their own.
APT ?= apt-get
goal_groups = $(if $(filter $(1),$(MAKECMDGOALS)),$(2))
DEPS_GROUPS := build $(sort $(call goal_groups,test,test) $(call goal_groups,demo fmnist,demo) \
    $(call goal_groups,plots,plots) $(call goal_groups,ablations demo-mediators,demo plots) \
    $(call goal_groups,fuzz,fuzz) $(call goal_groups,parity,parity) $(call goal_groups,bench,bench))
# deferred: the directory exists only once check-deps has installed the package
BLAS_OMP_DIR = $(firstword $(wildcard /usr/lib/*/openblas-openmp))
LDFLAGS += -L$(BLAS_OMP_DIR) -Wl,-rpath,$(BLAS_OMP_DIR)
LDLIBS += -lopenblas -lstb -lcjson -lmpi
# OpenMPI's headers are outside the default path (src/dist/ includes them)
MPI_INCLUDE = $(firstword $(wildcard /usr/lib/*/openmpi/include))
ifeq ($(NO_OMP),1)
  CFLAGS += -Wno-unknown-pragmas
else
  CFLAGS += -fopenmp -pthread
  LDFLAGS += -fopenmp -pthread
endif
ifeq ($(CUDA),1)
  # The CUDA kernel layer (src/cuda/*.cu, nvcc) joins libvitc; C files see VITC_CUDA. Objects go to
  # build/<mode>_cuda, so a CPU-only and a CUDA build never share objects compiled with other flags.
  CUDA_HOME ?= /usr/local/cuda
  NVCC      ?= $(CUDA_HOME)/bin/nvcc
  ifeq ($(shell command -v $(NVCC)),)
    $(error CUDA=1: no nvcc at $(NVCC) (set CUDA_HOME=/path/to/cuda or NVCC=/path/to/nvcc))
  endif
  # machine code for sm_80 (A100) and sm_90 (H100), and compute_90 PTX the driver compiles for newer
  CUDA_ARCH ?= -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=[sm_90,compute_90]
  # no --use_fast_math: the kernels are checked against the CPU to 1e-5 and feed gradient checks
  NVCCFLAGS := -std=c++17 -O3 -g -lineinfo $(CUDA_ARCH) -Isrc -MMD -MP -Xcompiler -Wall,-Wextra
  ifeq ($(WERROR),1)
    NVCCFLAGS += -Werror all-warnings -Xcompiler -Werror
  endif
  MODE    := $(MODE)_cuda
  CFLAGS  += -DVITC_CUDA
  LDFLAGS += -L$(CUDA_HOME)/lib64 -Wl,-rpath,$(CUDA_HOME)/lib64
  LDLIBS  += -lcublas -lcudart -lstdc++
  # NCCL for the multi-GPU gradient sums of src/dist (src/cuda/nccl_comm.cu): in CUDA's folders (as
  # NVIDIA's pip wheels lay it), else the system's (libnccl-dev), else NCCL_HOME=/path/to/nccl
  NCCL_HOME ?= $(CUDA_HOME)
  NCCL_DIR  := $(patsubst %/,%,$(dir $(firstword $(wildcard $(NCCL_HOME)/lib64/libnccl.so.2 \
               $(NCCL_HOME)/lib/libnccl.so.2 /usr/lib/*/libnccl.so.2))))
  ifeq ($(NCCL_DIR),)
    $(error CUDA=1: no libnccl.so.2 in $(NCCL_HOME)/lib64 or /usr/lib/* (install NCCL, or set NCCL_HOME=/path/to/nccl))
  endif
  NVCCFLAGS += $(filter-out -I/usr/include,-I$(NCCL_HOME)/include)
  LDFLAGS   += $(if $(filter $(NCCL_DIR),$(CUDA_HOME)/lib64),,-L$(NCCL_DIR) -Wl,-rpath,$(NCCL_DIR))
  LDLIBS    += -l:libnccl.so.2
  BUILD   ?= build/$(MODE)
  CUDA_OBJ      := $(patsubst %.cu,$(BUILD)/%.o,$(wildcard src/cuda/*.cu))
  CUDA_TEST_OBJ := $(patsubst %.c,$(BUILD)/%.o,$(wildcard tests/cuda/*.c))
  # the training-run test (tests/cuda/test_train.c) trains on tests/tiny_run.c's synthetic images
  CUDA_TEST_OBJ += $(BUILD)/tests/tiny_run.o $(BUILD)/tests/shell.o
  .DEFAULT_GOAL := all
  $(info CUDA=1: $(NVCC), $(words $(CUDA_OBJ)) kernel files, into $(BUILD))
  all: $(BUILD)/test_cuda $(BUILD)/test_cuda_emu
  $(BUILD)/libvitc.a: $(CUDA_OBJ)
  $(BUILD)/%.o: %.cu Makefile | check-deps
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCCFLAGS) -c $< -o $@
  # the CUDA kernels against the CPU ones (tests/cuda; tools/cuda_check.sh runs it)
  $(BUILD)/test_cuda: $(CUDA_TEST_OBJ) $(BUILD)/tests/main.o $(BUILD)/libvitc.a
	$(CC) $(LDFLAGS) $^ -o $@ $(LDLIBS)
  # The same tests on tests/cuda/emu's CPU stand-in for CUDA and cuBLAS, for where no GPU is lent:
  # it checks the kernels' logic, not the GPU. Each .cu is compiled as C++ once sed has rewritten
  # its launches k<<<grid, block>>>(args) to emu_launch(k, grid, block)(args).
  EMU_OBJ   := $(patsubst %.cu,$(BUILD)/emu/%.o,$(wildcard src/cuda/*.cu)) \
               $(patsubst %.cpp,$(BUILD)/emu/%.o,$(wildcard tests/cuda/emu/*.cpp))
  EMU_FLAGS := -std=c++17 -O2 -g -Wall -Wextra -MMD -MP -Itests/cuda/emu -Isrc/cuda -Isrc
  ifeq ($(WERROR),1)
    EMU_FLAGS += -Werror
  endif
  # the stand-in for NCCL combines the ranks' data over MPI
  $(BUILD)/emu/tests/cuda/emu/nccl.o: EMU_FLAGS += -I$(MPI_INCLUDE)
  # Headers with launches (.cuh) are rewritten too, beside the .cpp files: their includes look
  # there first.
  EMU_LAUNCHES := sed -E 's/([A-Za-z_][A-Za-z_0-9]*(<[^<>]*>)?)<<<(.*)>>>\(/emu_launch(\1, \3)(/'
  EMU_CUH      := $(patsubst %.cuh,$(BUILD)/emu/%.cuh,$(wildcard src/cuda/*.cuh))
  $(BUILD)/emu/%.cuh: %.cuh Makefile
	@mkdir -p $(dir $@)
	{ echo '#line 1 "$<"'; $(EMU_LAUNCHES) $<; } > $@
  $(EMU_OBJ): $(EMU_CUH)
  $(BUILD)/emu/%.o: %.cu Makefile
	@mkdir -p $(dir $@)
	{ echo '#line 1 "$<"'; $(EMU_LAUNCHES) $<; } > $(@:.o=.cpp)
	$(CXX) $(EMU_FLAGS) -c $(@:.o=.cpp) -o $@
  $(BUILD)/emu/%.o: %.cpp Makefile
	@mkdir -p $(dir $@)
	$(CXX) $(EMU_FLAGS) -c $< -o $@
  $(BUILD)/test_cuda_emu: $(CUDA_TEST_OBJ) $(BUILD)/tests/main.o $(EMU_OBJ) $(BUILD)/libvitc.a
	$(CC) $(LDFLAGS) $^ -o $@ $(LDLIBS)
  -include $(CUDA_OBJ:.o=.d) $(CUDA_TEST_OBJ:.o=.d) $(EMU_OBJ:.o=.d)
endif

BUILD ?= build/$(MODE)
LIB_SRC   := $(wildcard src/*/*.c) $(wildcard models/*.c) $(wildcard models/attn/*.c)
TEST_SRC  := $(wildcard tests/*.c)
LIB_OBJ   := $(LIB_SRC:%.c=$(BUILD)/%.o)
TEST_OBJ  := $(TEST_SRC:%.c=$(BUILD)/%.o)
$(BUILD)/src/dist/%.o: CFLAGS += -I$(MPI_INCLUDE)

CLIS := train eval sample

FMNIST_SRC := /usr/share/datasets/fashion-mnist
FMNIST := data/fashion_mnist

# the PyTorch reference: Debian's python3-torch (check-deps installs it for make parity)
PYTHON ?= /usr/bin/python3

.PHONY: all test bench bench-dist bench-gemm-bf16 bench-ops deps clean check-deps demo demo-mediators fmnist ablations plots parity fuzz $(CLIS)
all: check-deps $(CLIS) $(BUILD)/test_runner $(BUILD)/bench_ops $(BUILD)/bench

# the command-line tools land in the repository root (./train, ./eval), built from tools/<name>.c
$(CLIS): %: $(BUILD)/%
	cp $< $@.tmp && mv -f $@.tmp $@

$(CLIS:%=$(BUILD)/%) $(BUILD)/bench: $(BUILD)/%: $(BUILD)/tools/%.o $(BUILD)/libvitc.a
	$(CC) $(LDFLAGS) $^ -o $@ $(LDLIBS)

# installs what is missing as root; otherwise names the apt-get line and stops before any compile
check-deps:
	@CC="$(CC)" APT="$(APT)" tools/deps.sh --install $(DEPS_GROUPS)

deps:
	@CC="$(CC)" APT="$(APT)" tools/deps.sh --install build

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

test: check-deps $(CLIS) $(BUILD)/test_runner $(BUILD)/bench
	VITC_BENCH=$(BUILD)/bench $(BUILD)/test_runner $(T)

# vitc vs the PyTorch reference models, same run (MODELS=a,b restricts the list)
bench: check-deps $(BUILD)/bench
	MODELS=$(MODELS) tools/bench.sh

# data-parallel training: 1 rank x 2 threads against 2 ranks x 1 thread (mpirun), bench/dist.json
bench-dist: check-deps $(BUILD)/bench
	MODELS=$(MODELS) tools/bench_dist.sh

bench-ops: check-deps $(BUILD)/bench_ops
	$(BUILD)/bench_ops

# bf16 GEMMs against fp32 and, where libdnnl-dev is installed, oneDNN's matmul (docs/bf16.md)
bench-gemm-bf16: check-deps $(BUILD)/bench_gemm_bf16
	$(BUILD)/bench_gemm_bf16

$(BUILD)/bench_gemm_bf16: $(BUILD)/tools/bench_gemm_bf16.o $(BUILD)/libvitc.a
	$(CC) $(LDFLAGS) $^ -o $@ $(LDLIBS) $(if $(wildcard /usr/include/dnnl.h),-ldnnl)

# Debian's Fashion-MNIST as class folders of PNGs, and a 1000-per-class training list for the ablations
fmnist: check-deps $(BUILD)/fmnist_to_png
	@test -d $(FMNIST)/val || $(BUILD)/fmnist_to_png $(FMNIST_SRC) $(FMNIST)
	@test -f $(FMNIST)/train_10k.txt || { label=0; for d in $(FMNIST)/train/*/; do \
	  c=$$(basename $$d); ls $$d | sort | head -1000 | sed "s|^|train/$$c/|; s|$$| $$label|"; \
	  label=$$((label + 1)); done > $(FMNIST)/train_10k.txt; }

# the first thing to run: prepare Fashion-MNIST, train a small Agent-DeiT, evaluate it
# (PRECISION=bf16: bf16 GEMMs, run checkpoints/demo_fmnist_bf16); run again, it trains again
PRECISION ?= fp32
DEMO_RUN = demo_fmnist$(if $(filter-out fp32,$(PRECISION)),_$(PRECISION))
demo: fmnist train eval
	./train --config configs/demo_fmnist.json --out checkpoints --precision $(PRECISION) --set run.name=$(DEMO_RUN) \
	  --overwrite
	./eval --ckpt checkpoints/$(DEMO_RUN)/last.safetensors --data $(FMNIST)/val --precision $(PRECISION)

# the Attention Mediators demo of docs/mediators.md (about 2.5 hours on 2 cores): four SiTs on
# Fashion-MNIST (vanilla, 4/16/64 mediators), judged by the demo's classifier, the schedule, JSD
demo-mediators: fmnist train sample $(BUILD)/bench
	@test -f checkpoints/demo_fmnist/last.safetensors || $(MAKE) demo
	tools/mediators_demo.sh

# the study of docs/ablations.md (about an hour on 2 cores): sweeps/, docs/ablations/*.png and the
# tables of docs/ablations.md
ablations: fmnist train eval
	tools/ablations.sh

# loss and accuracy curves of the demo run (trained first if it is not there): plots/demo_*.png
plots: check-deps
	@test -f checkpoints/demo_fmnist/metrics.jsonl || $(MAKE) demo
	tools/plot.sh --run checkpoints/demo_fmnist --out plots/demo

# regenerates the committed fixtures from the PyTorch reference models in tools/ref/
parity: check-deps $(BUILD)/test_runner
	$(PYTHON) tools/ref/make_parity.py configs/tiny tests/fixtures/parity
	$(PYTHON) tools/ref/make_train_parity.py tests/fixtures/train_parity.safetensors
	$(PYTHON) tools/ref/make_grid_resize_parity.py tests/fixtures/grid_resize.safetensors
	$(BUILD)/test_runner parity

# libFuzzer runs of the checkpoint and config loaders (clang), FUZZ_SECONDS each. The sanitizers'
# checks keep clang from vectorizing the kernels' `omp simd` loops, which it would report one by one
# (-Wpass-failed): nothing the fuzzers look for.
FUZZ_SECONDS ?= 600
FUZZ_FLAGS := -std=c11 -D_DEFAULT_SOURCE -g -O1 -fsanitize=fuzzer,address,undefined -Isrc \
              -I/usr/include/stb -fopenmp -pthread -Wno-pass-failed
FUZZ_LIB_SRC := $(filter-out tools/%,$(LIB_SRC))
fuzz: check-deps
	@mkdir -p build/fuzz/corpus_checkpoint build/fuzz/corpus_config
	cp tests/fixtures/converted_swin_agent.safetensors build/fuzz/corpus_checkpoint/
	cp configs/*.json configs/tiny/*.json build/fuzz/corpus_config/
	clang $(FUZZ_FLAGS) -I$(MPI_INCLUDE) tests/fuzz/fuzz_checkpoint.c $(FUZZ_LIB_SRC) -o build/fuzz/fuzz_checkpoint $(LDLIBS) $(filter -L% -Wl%,$(LDFLAGS))
	clang $(FUZZ_FLAGS) -I$(MPI_INCLUDE) tests/fuzz/fuzz_config.c $(FUZZ_LIB_SRC) -o build/fuzz/fuzz_config $(LDLIBS) $(filter -L% -Wl%,$(LDFLAGS))
	ASAN_OPTIONS=detect_leaks=0 build/fuzz/fuzz_checkpoint -max_total_time=$(FUZZ_SECONDS) -detect_leaks=0 -max_len=300000 -artifact_prefix=build/fuzz/ build/fuzz/corpus_checkpoint
	ASAN_OPTIONS=detect_leaks=0 build/fuzz/fuzz_config -max_total_time=$(FUZZ_SECONDS) -detect_leaks=0 -artifact_prefix=build/fuzz/ build/fuzz/corpus_config

clean:
	rm -rf build $(CLIS)

-include $(LIB_OBJ:.o=.d) $(TEST_OBJ:.o=.d) $(CLIS:%=$(BUILD)/tools/%.d) $(BUILD)/tools/bench_ops.d \
         $(BUILD)/tools/bench.d $(BUILD)/tools/bench_gemm_bf16.d
