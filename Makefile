# gemma4c build. `make` builds build/gemma4c; `make test` runs every test; `make asan` builds
# and runs the C tests under AddressSanitizer + UBSan into build-asan/.
# BUILD=dir selects the output folder so parallel builds (release, asan, fuzz) never collide.
BUILD    ?= build
CC       ?= cc
OPT      ?= -O2
# The hot kernels need full unrolling of their register blocks (2-3x faster than -O2); the fuzz
# build, whose targets never run them, compiles them unoptimized
KERNEL_OPT ?= -O3
WERROR   ?= -Werror
CFLAGS   += -std=c11 -D_GNU_SOURCE -Wall -Wextra $(WERROR) -g $(OPT) -pthread -Iinclude -Isrc $(EXTRA_CFLAGS) $(SANITIZE)
# The Python that runs the tests: scripts/install-deps.sh's virtual environment where it exists
PYTHON   ?= $(if $(wildcard .venv/bin/python),$(abspath .venv/bin/python),python3)
LDLIBS   += -ljansson -lmicrohttpd -lpng -ljpeg -lwebpdemux -lwebp -lgif -lsndfile -lsoxr -lcurl -lz -lm -pthread $(EXTRA_LDLIBS)

# Optional libraries, used when installed (scripts/install-deps.sh installs both): OpenMPI for the
# mpi tensor-parallel backend, libnuma to place each rank on its own NUMA node.
HAVE_MPI  := $(shell pkg-config --exists ompi-c 2>/dev/null && echo 1)
ifeq ($(HAVE_MPI),1)
  MPI_CFLAGS := -DG4_HAVE_MPI $(shell pkg-config --cflags ompi-c)
  LDLIBS     += $(shell pkg-config --libs ompi-c)
endif
ifneq ($(wildcard /usr/include/numa.h),)
  NUMA_CFLAGS := -DG4_HAVE_NUMA
  LDLIBS      += -lnuma
endif

# SKIP="src/tokenizer/%" leaves modules out of a local build (e.g. a colleague's half-written code)
SKIP     ?=
LIB_SRC  := $(filter-out $(SKIP),$(shell find src -name '*.c' -not -path 'src/cli/*' | sort))
CLI_SRC  := $(shell find src/cli -name '*.c' | sort)
TEST_SRC := $(shell find tests/c -name 'test_*.c' | sort)
LIB_OBJ  := $(LIB_SRC:%.c=$(BUILD)/%.o)
CLI_OBJ  := $(CLI_SRC:%.c=$(BUILD)/%.o)
TESTS    := $(TEST_SRC:tests/c/%.c=$(BUILD)/tests/%)

.PHONY: all test test-c test-py asan asan-ci clean fuzz
all: $(BUILD)/gemma4c $(TESTS)

$(BUILD)/src/kernels/%.o: CFLAGS += $(KERNEL_OPT) $(KERNEL_CFLAGS)
# SANITIZE (the sanitizer build's flags) leaves out the AVX-512 and AMX kernels' objects on a CPU
# without AVX-512: none of their instructions can run there (the dispatch never picks them; the
# emulated tests compile those sources into the test itself, sanitized), and instrumenting them was
# half of that build's time.
ifeq ($(shell grep -qw avx512f /proc/cpuinfo 2>/dev/null || echo none),none)
$(filter $(BUILD)/src/kernels/cpu/%avx512.o $(BUILD)/src/kernels/cpu/%_amx.o,$(LIB_OBJ)): override SANITIZE :=
endif
$(BUILD)/src/parallel/comm_mpi.o: CFLAGS += $(MPI_CFLAGS)
$(BUILD)/src/parallel/group.o: CFLAGS += $(NUMA_CFLAGS)
# `gemma4c --version` names the commit; main.o is rebuilt when HEAD moves
$(BUILD)/src/cli/main.o: CFLAGS += $(if $(shell git rev-parse --short HEAD 2>/dev/null),-DG4_COMMIT='"$(shell git rev-parse --short HEAD 2>/dev/null)"')
$(BUILD)/src/cli/main.o: $(wildcard .git/logs/HEAD)
# emulated AVX-512 vectors passed by value without AVX-512 enabled (tests/c/emu_avx512_amx.h)
$(BUILD)/tests/test_bf16_matmul $(BUILD)/tests/test_avx512_matmul: CFLAGS += -Wno-psabi

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -MMD -MP -c $< -o $@

$(BUILD)/libgemma4c.a: $(LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(BUILD)/gemma4c: $(CLI_OBJ) $(BUILD)/libgemma4c.a
	$(CC) $(CFLAGS) $^ -o $@ $(LDLIBS)

$(BUILD)/tests/%: tests/c/%.c $(BUILD)/libgemma4c.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $< $(BUILD)/libgemma4c.a -o $@ $(LDLIBS) -lcmocka

# pytest's worker processes (pytest-xdist, from tests/requirements.txt): the tests wait on
# subprocesses and sockets much of the time, so two workers on two cores take 0.57x the wall time
# of one. PYTEST_JOBS=0 runs them in the pytest process itself.
PYTEST_JOBS ?= 2
PYTEST    = $(PYTHON) -m pytest -q $(if $(shell $(PYTHON) -c 'import xdist' 2>/dev/null && echo 1),-n $(PYTEST_JOBS))

# C unit tests, then the Python golden/CLI/server tests (which use build/gemma4c).
test: all
	./scripts/check-wording.sh
	./tests/run_c_tests.sh $(BUILD)
	G4_BIN=$(abspath $(BUILD)/gemma4c) $(PYTEST) tests/py

test-c: all
	./tests/run_c_tests.sh $(BUILD)

# The kernels at -O2 there: the sanitized build took 4.7 minutes with them at -O3, 2.3 at -O2
# (1.6 at -O1, but then its tests ran a third longer)
asan:
	$(MAKE) BUILD=build-asan OPT="-O1 -fno-omit-frame-pointer" KERNEL_OPT=-O2 \
	  SANITIZE="-fsanitize=address,undefined -fno-sanitize-recover=undefined" \
	  EXTRA_LDLIBS="-fsanitize=address,undefined" all
	./tests/run_c_tests.sh build-asan
	G4_BIN=$(abspath build-asan/gemma4c) G4_ASAN=1 $(PYTEST) $(ASAN_PYTEST) -m "not slow"

# What CI runs under the sanitizers after `make test`: every C test, the bad-input, CLI and server
# tests, the greedy LM head's, and the goldens at one chunk size (the full set at three sizes runs
# in `make test`).
ASAN_PYTEST ?= tests/py
asan-ci:
	$(MAKE) asan ASAN_PYTEST="tests/py/test_bad_input.py tests/py/test_run_text.py tests/py/test_server.py tests/py/test_server_exposure.py \
	  tests/py/test_cli_basics.py tests/py/test_goldens.py tests/py/test_tp.py tests/py/test_media.py tests/py/test_multimodal.py tests/py/test_multimodal_server.py tests/py/test_remote_media.py \
	  tests/py/test_prompt_cache.py tests/py/test_prompt_cache_media.py tests/py/test_server_limits.py tests/py/test_responses.py \
	  tests/py/test_tool_choice.py tests/py/test_greedy_head.py -k 'not greedy or chunk-7 or greedy_head'"

clean:
	rm -rf build build-asan build-fuzz

-include $(LIB_OBJ:.o=.d) $(CLI_OBJ:.o=.d)

# Fuzzing (clang, libFuzzer + ASan + UBSan): every fuzz/fuzz_*.c target linked against the whole
# library built into build-fuzz/, so a target never falls out of step with the sources.
# `make fuzz-build` builds them all; `make fuzz-smoke` runs each on its seeds for FUZZ_SMOKE_SECS
# (CI); `make fuzz-NAME` runs fuzz/run_NAME.sh for FUZZ_SECS. The kernels are compiled with every
# x86 feature they use (clang ignores GCC's target pragmas); no fuzz target runs them.
FUZZ_SECS       ?= 60
FUZZ_SMOKE_SECS ?= 10
FUZZ_CC         ?= clang
FUZZ_SAN        := -fsanitize=address,undefined -fno-sanitize-recover=undefined
FUZZ_KERNEL_CFLAGS := -mavx2 -mfma -mf16c -mavx512f -mavx512bw -mavx512vl -mavx512vnni -mavx512bf16 -mamx-tile -mamx-bf16
FUZZ_TARGETS    := $(patsubst fuzz/%.c,build-fuzz/%,$(sort $(wildcard fuzz/fuzz_*.c)))
.PHONY: fuzz-build fuzz-smoke fuzz-lib
fuzz-lib:
	$(MAKE) BUILD=build-fuzz CC=$(FUZZ_CC) OPT="-O1 -fno-omit-frame-pointer" KERNEL_OPT=-O0 WERROR= \
	  EXTRA_CFLAGS="-fsanitize=fuzzer-no-link $(FUZZ_SAN)" KERNEL_CFLAGS="$(FUZZ_KERNEL_CFLAGS)" build-fuzz/libgemma4c.a
fuzz-build: fuzz-lib
	$(MAKE) $(FUZZ_TARGETS)
build-fuzz/fuzz_%: fuzz/fuzz_%.c build-fuzz/libgemma4c.a
	$(FUZZ_CC) -std=c11 -D_GNU_SOURCE -g -O1 -Iinclude -Isrc -fsanitize=fuzzer $(FUZZ_SAN) $< build-fuzz/libgemma4c.a \
	  -o $@ $(LDLIBS)
fuzz-smoke: fuzz-build
	fuzz/smoke.sh $(FUZZ_SMOKE_SECS)
fuzz-%: fuzz-build
	fuzz/run_$*.sh $(FUZZ_SECS)

# The side-by-side tokenizer benchmark against HF `tokenizers` (BENCH_PY: a Python that has it).
BENCH_PY  ?= $(or $(G4_REF_PY),python3)
.PHONY: bench-tokenizer

$(BUILD)/bench/tokenizer_bench: bench/tokenizer_bench.c $(BUILD)/libgemma4c.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $< $(BUILD)/libgemma4c.a -o $@ $(LDLIBS)

$(BUILD)/bench/mm_bench: bench/mm_bench.c $(BUILD)/libgemma4c.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $< $(BUILD)/libgemma4c.a -o $@ $(LDLIBS)

$(BUILD)/bench/gemm_bench: bench/gemm_bench.c $(BUILD)/libgemma4c.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $< $(BUILD)/libgemma4c.a -o $@ $(LDLIBS)

$(BUILD)/bench/quant_panel_bench: bench/quant_panel_bench.c $(BUILD)/libgemma4c.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $< $(BUILD)/libgemma4c.a -o $@ $(LDLIBS)

$(BUILD)/bench/grammar_bench: bench/grammar_bench.c $(BUILD)/libgemma4c.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $< $(BUILD)/libgemma4c.a -o $@ $(LDLIBS)

bench-tokenizer: $(BUILD)/bench/tokenizer_bench
	$(BENCH_PY) bench/tokenizer_bench.py --bin $(BUILD)/bench/tokenizer_bench
