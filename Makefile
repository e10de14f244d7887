# The userspace program of the repository: tools/balance-status (static, so
# that the test VM's initramfs can run it too).  The kernel work is in
# kernel-patches/ and the scripts (README.md).
CC ?= gcc
CFLAGS ?= -O2
CFLAGS += -Wall -Wextra
LDFLAGS += -static

all: tools/balance-status

tools/balance-status: tools/balance-status.c tools/balance-abi.h
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $<

clean:
	rm -f tools/balance-status

.PHONY: all clean
