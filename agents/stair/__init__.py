"""STAIR: fine-grained layered multicast with stair layers (Byers et al., ToN 2006)."""
