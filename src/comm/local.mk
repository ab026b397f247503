# src/comm
