"""One module per ASC code family; every ``Rule`` subclass here registers itself."""
