# src/train
