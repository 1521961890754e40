"""The semantic model every rule asks: scoped names, values flowing through assignments, tensors and masks."""
