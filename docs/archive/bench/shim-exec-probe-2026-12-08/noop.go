// noop: a CNI plugin that reads its config and answers an empty 1.0.0 result on ADD, nothing otherwise.
package main

import (
	"io"
	"os"
)

func main() {
	_, _ = io.ReadAll(os.Stdin)
	if os.Getenv("CNI_COMMAND") == "ADD" {
		os.Stdout.WriteString(`{"cniVersion":"1.0.0"}`)
	}
}
