package upgrade

// EncodeSlots is how many frames are compressed at once, for the memory
// test outside the package.
func EncodeSlots() int { return cap(encodeSlots) }
