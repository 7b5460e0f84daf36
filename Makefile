# podshaper: the commands a person types. Everything builds in build/.
BUILD_DIR ?= build
JOBS ?= $(shell nproc)

.PHONY: all deps build test unit-test demo clean

all: build

deps:
	@bash scripts/deps.sh

$(BUILD_DIR)/CMakeCache.txt:
	cmake -S . -B $(BUILD_DIR) -DCMAKE_BUILD_TYPE=RelWithDebInfo

build: deps $(BUILD_DIR)/CMakeCache.txt
	cmake --build $(BUILD_DIR) -j $(JOBS)

test: build
	cd $(BUILD_DIR) && ctest --output-on-failure -j $(JOBS)

demo: build
	@bash scripts/demo.sh

clean:
	rm -rf $(BUILD_DIR)
