// Command weed-binary prints the path of the SeaweedFS weed binary the
// tests use, building it into the cache first when it is missing (see
// package seaweed). `make test-deps` runs it.
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/aetheriot/aether-audit/internal/seaweed"
)

func main() {
	bin, err := seaweed.Binary(context.Background(), os.Stderr)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println(bin)
}
