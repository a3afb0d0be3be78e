# iod build. `make` builds build/iod; `make test` runs every test under
# ASan+UBSan and ends with "N passed, N failed, N skipped".
#
# Sources are discovered, not listed: every src/<module>/*.c goes into the
# binary, every tests/unit/*.c, tests/sim/*.c and tests/integration/*.c becomes one test program,
# every tests/fuzz/fuzz_*.c one libFuzzer target, every bench/bench_*.c one
# benchmark. A module that needs another system library adds it to PKGS.

# Parallel by default: one job per core (`make test` builds three copies of
# the library: release, sanitizers, fuzz). A -j on the command line wins over
# this line; a -j in MAKEFLAGS from the environment is kept; sub-makes share
# the top make's jobserver (MAKELEVEL 0 only). `make -j1` builds serially.
ifeq ($(MAKELEVEL),0)
ifeq ($(filter -j% --jobs%,$(shell printenv MAKEFLAGS)),)
MAKEFLAGS += -j$(shell nproc 2>/dev/null || echo 1)
endif
endif

CC       ?= gcc
ifeq ($(origin CC),default)
CC       := gcc
endif
FUZZ_CC  ?= clang
PREFIX   ?= /usr/local
BUILD    := build

# Install missing Debian packages before anything reads pkg-config: on a fresh
# machine the flags below would otherwise be empty. Skipped for targets that
# compile nothing, and in sub-makes (the top make checked).
NODEPS_GOALS := clean format
ifeq ($(MAKELEVEL),0)
ifneq ($(filter-out $(NODEPS_GOALS),$(or $(MAKECMDGOALS),all)),)
DEPS_OK := $(shell sh scripts/deps.sh >&2 && echo ok)
ifneq ($(DEPS_OK),ok)
$(error scripts/deps.sh failed: install the packages it names, then run make again)
endif
endif
endif

# pkg-config names of the Debian -dev packages every binary links against.
PKGS     := libuv raft yaml-0.1 jansson hwloc libmicrohttpd libpcap gnutls libseccomp libcap-ng ncursesw \
            libxxhash liburing libnghttp2 ucx
PKG_CFLAGS := $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS   := $(shell pkg-config --libs $(PKGS) 2>/dev/null)

# DPDK objects (src/io/dpdk/*.c) link into build/iod and the benchmarks
# only: linking DPDK's ~700 libraries and their constructors into every
# sanitizer test program would slow `make test` and flood ASan's reports.
# Without libdpdk the variables are empty and iod builds without it.
DPDK_LIBS  := $(shell pkg-config --libs libdpdk 2>/dev/null)
DPDK_CFLAGS:= $(if $(DPDK_LIBS),$(shell pkg-config --cflags libdpdk) -DALLOW_EXPERIMENTAL_API)

VERSION  := $(shell git describe --always --dirty 2>/dev/null || echo unknown)
WARN     := -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wno-unused-parameter -Wno-format-truncation
BASE_CFLAGS := -std=c11 -D_GNU_SOURCE -Iinclude -Isrc -Itests $(WARN) $(PKG_CFLAGS) \
               -DIOD_VERSION=\"$(VERSION)\" -MMD -MP
CFLAGS_REL  := $(BASE_CFLAGS) -O2 -g -DNDEBUG_HOT
CFLAGS_SAN  := $(BASE_CFLAGS) -O1 -g -fno-omit-frame-pointer \
               -fsanitize=address,undefined -fno-sanitize-recover=undefined
LDLIBS   := $(PKG_LIBS) -ldl -lpthread -lm

SRC      := $(sort $(wildcard src/*/*.c))
LIB_SRC  := $(filter-out src/cli/main.c,$(SRC))
UNIT_SRC := $(sort $(wildcard tests/unit/*.c tests/sim/*.c tests/integration/*.c))
FUZZ_SRC := $(sort $(wildcard tests/fuzz/fuzz_*.c))
BENCH_SRC:= $(sort $(wildcard bench/bench_*.c))

REL_OBJ  := $(LIB_SRC:%.c=$(BUILD)/rel/%.o)
DPDK_OBJ := $(if $(DPDK_LIBS),$(patsubst %.c,$(BUILD)/dpdk/%.o,$(sort $(wildcard src/io/dpdk/*.c))))
SAN_OBJ  := $(LIB_SRC:%.c=$(BUILD)/san/%.o)
FUZZ_OBJ := $(LIB_SRC:%.c=$(BUILD)/fuzz/%.o)
TEST_BIN := $(UNIT_SRC:%.c=$(BUILD)/san/%)
FUZZ_BIN := $(FUZZ_SRC:tests/fuzz/%.c=$(BUILD)/fuzz/%)
BENCH_BIN:= $(BENCH_SRC:bench/%.c=$(BUILD)/bench/%)

.PHONY: all deps test unit fuzz fuzz-build bench bench-security bench-storage-nodeloss bench-storage-nodeloss-1g bench-sim-cluster bench-ar-cluster bench-net-move lint format run install clean
all: $(BUILD)/iod

deps:
	@true

$(BUILD)/iod: $(REL_OBJ) $(DPDK_OBJ) $(BUILD)/rel/src/cli/main.o
	@echo "  LD      $@"
	$(Q)$(CC) -o $@ $^ $(LDLIBS) $(DPDK_LIBS)

$(BUILD)/san/iod: $(SAN_OBJ) $(BUILD)/san/src/cli/main.o
	@echo "  LD san  $@"
	$(Q)$(CC) -fsanitize=address,undefined -o $@ $^ $(LDLIBS)

Q ?= @
$(BUILD)/rel/%.o: %.c
	@mkdir -p $(dir $@)
	@echo "  CC      $<"
	$(Q)$(CC) $(CFLAGS_REL) -c -o $@ $<

$(BUILD)/dpdk/%.o: %.c
	@mkdir -p $(dir $@)
	@echo "  CC dpdk $<"
	$(Q)$(CC) $(filter-out -std=c11,$(CFLAGS_REL)) -std=gnu11 $(DPDK_CFLAGS) -c -o $@ $<

$(BUILD)/san/%.o: %.c
	@mkdir -p $(dir $@)
	@echo "  CC san  $<"
	$(Q)$(CC) $(CFLAGS_SAN) -c -o $@ $<

$(TEST_BIN): %: %.o $(BUILD)/san/tests/harness.o $(SAN_OBJ)
	@echo "  LD san  $@"
	$(Q)$(CC) -fsanitize=address,undefined -o $@ $^ $(LDLIBS)

# Fuzz targets: the library again, built by clang with coverage for libFuzzer.
FUZZ_CFLAGS := $(BASE_CFLAGS) -O1 -g \
               -fsanitize=fuzzer-no-link,address,undefined -Wno-unknown-warning-option
$(BUILD)/fuzz/%.o: %.c
	@mkdir -p $(dir $@)
	@echo "  CC fuzz $<"
	$(Q)$(FUZZ_CC) $(FUZZ_CFLAGS) -c -o $@ $<
$(FUZZ_BIN): $(BUILD)/fuzz/%: $(BUILD)/fuzz/tests/fuzz/%.o $(FUZZ_OBJ)
	@echo "  LD fuzz $@"
	$(Q)$(FUZZ_CC) -fsanitize=fuzzer,address,undefined -o $@ $^ $(LDLIBS)

$(BENCH_BIN): $(BUILD)/bench/%: bench/%.c $(REL_OBJ) $(DPDK_OBJ)
	@mkdir -p $(dir $@)
	@echo "  CC+LD   $@"
	$(Q)$(CC) $(CFLAGS_REL) -o $@ $< $(REL_OBJ) $(DPDK_OBJ) $(LDLIBS) $(DPDK_LIBS)

# The whole test run: unit + sim programs, integration scripts, fuzz smoke runs.
# The fuzz targets (when FUZZ_CC exists) are built by run-tests.sh in the
# background, niced and on one core, while the unit and integration tests
# run: their third copy of the library costs the run no wall time.
HAVE_FUZZ_CC := $(shell command -v $(FUZZ_CC) 2>/dev/null)
test: deps $(BUILD)/iod $(BUILD)/san/iod $(TEST_BIN)
	@IOD_FUZZ_BUILD='$(if $(HAVE_FUZZ_CC),$(MAKE) -j1 --no-print-directory fuzz-build)' \
		sh scripts/run-tests.sh $(BUILD)

unit: deps $(TEST_BIN)
	@IOD_TEST_ONLY=unit sh scripts/run-tests.sh $(BUILD)

fuzz-build: $(FUZZ_BIN)

# A longer fuzz campaign with random seeds: make fuzz [FUZZ_SECONDS=300]
FUZZ_SECONDS ?= 120
fuzz: deps fuzz-build
	@IOD_TEST_ONLY=fuzz IOD_FUZZ_SEED=0 IOD_FUZZ_SECONDS=$(FUZZ_SECONDS) sh scripts/run-tests.sh $(BUILD)

bench: deps $(BENCH_BIN) $(BUILD)/iod
	@for b in $(BENCH_BIN); do echo "== $$b"; $$b || exit 1; done

# Node loss on `iod up --netns` (root): BENCH storage.nodeloss, the state
# sized by CKPT_NETNS_PARAMS (floats; default 1 MiB), docs/storage.md.
CKPT_NETNS_PARAMS ?= 262144
CKPT_NETNS_STATE ?= 0
bench-storage-nodeloss: deps $(BUILD)/iod
	@CKPT_NETNS_PARAMS=$(CKPT_NETNS_PARAMS) CKPT_NETNS_STATE=$(CKPT_NETNS_STATE) flock /tmp/iod-cluster.lock sh tests/integration/ckpt_netns.sh $(BUILD)
# The target's 1 GiB of state: the default shard plus 1 GiB - 1 MiB of
# optimizer state (demo-worker --state-bytes), never shipped to the worker.
bench-storage-nodeloss-1g: deps $(BUILD)/iod
	@CKPT_NETNS_PARAMS=262144 CKPT_NETNS_STATE=1072693248 flock /tmp/iod-cluster.lock sh tests/integration/ckpt_netns.sh $(BUILD)

# The round-repeated figures of two `iod up --netns` scripts (root): make
# test runs fewer rounds of each (the same checks), these the full count for
# the BENCH quantiles: net.ar_move and net.ar_cut (AR_ROUNDS, default 3 in
# make test), net.move_reachable (IOD_MOVE_ROUNDS, default 2), docs/network.md.
AR_ROUNDS ?= 5
IOD_MOVE_ROUNDS ?= 5
bench-ar-cluster: deps $(BUILD)/iod
	@AR_ROUNDS=$(AR_ROUNDS) flock /tmp/iod-cluster.lock sh tests/integration/ar_cluster_netns.sh $(BUILD)
bench-net-move: deps $(BUILD)/iod
	@IOD_MOVE_ROUNDS=$(IOD_MOVE_ROUNDS) flock /tmp/iod-cluster.lock sh tests/integration/move_netns.sh $(BUILD)

bench-%: deps $(BUILD)/bench/bench_% $(BUILD)/iod
	@$(BUILD)/bench/bench_$*

# The whole-cluster simulator's benchmark has an underscore in its file name.
bench-sim-cluster: deps $(BUILD)/bench/bench_sim_cluster
	@$(BUILD)/bench/bench_sim_cluster

# The security figures in one run: the sandbox's (bench_sandbox.c: sec.syscall,
# sec.sandbox_start) and, where it exists, the control plane's (bench_security.c).
SEC_BENCH := $(BUILD)/bench/bench_sandbox $(if $(wildcard bench/bench_security.c),$(BUILD)/bench/bench_security)
bench-security: deps $(BUILD)/iod $(SEC_BENCH)
	@for b in $(SEC_BENCH); do $$b || exit 1; done

lint:
	@sh scripts/lint.sh

format:
	@clang-format -i $(SRC) $(wildcard include/iod/*.h src/*/*.h tests/*.c tests/*.h \
		tests/*/*.c bench/*.c)

run: all
	@sh scripts/run.sh $(BUILD)/iod

install: all
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/share/iod/examples
	install -m 755 $(BUILD)/iod $(DESTDIR)$(PREFIX)/bin/iod
	cp -r examples/. $(DESTDIR)$(PREFIX)/share/iod/examples/

clean:
	rm -rf $(BUILD)

# The live view's page is embedded with .incbin (src/cli/viz_assets.c).
VIZ_ASSETS := $(wildcard src/cli/viz/*)
$(BUILD)/rel/src/cli/viz_assets.o $(BUILD)/san/src/cli/viz_assets.o $(BUILD)/fuzz/src/cli/viz_assets.o: $(VIZ_ASSETS)

.SECONDARY:
-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
