# src/optim
