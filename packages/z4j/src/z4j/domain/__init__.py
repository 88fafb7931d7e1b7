"""Pure rules of z4j: task states, the mapping of wire events onto them."""
