package padding_test

import (
	"fmt"

	"github.com/skytale-oss/skytale/padding"
)

func Example() {
	msg := []byte("meet at noon")
	block := padding.Pad(msg)
	fmt.Println(len(block))

	got, err := padding.Unpad(block)
	fmt.Printf("%s %v\n", got, err)

	for _, n := range []int{0, 300, 40000, 1 << 20} {
		fmt.Println(n, "->", padding.Size(n))
	}
	// Output:
	// 256
	// meet at noon <nil>
	// 0 -> 256
	// 300 -> 512
	// 40000 -> 40960
	// 1048576 -> 1081344
}
