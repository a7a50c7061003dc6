"""ConvFiT (Vulić et al., 2021): Stage 1 response ranking (``stage1``) and Stage 2 task-tailored specialisation
with k-NN intent detection (``stage2``)."""
