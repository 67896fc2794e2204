251214_2126

## terminal
$ python -m ttv.tgm > t_tgm-251214_2126.m
INFO:Trainer:Starting Training on: cuda
INFO:Trainer:Loading .pt files from: verf/processed_tensors
Loading Data: 100%|████████████████████████████████| 84/84 [00:09<00:00,  9.02it/s]
INFO:Trainer:Saved 14 test subjects to verf/test_subjects-251214_2126.txt
INFO:Trainer:Split: Train=58, Val=12
INFO:Trainer:No resume (starting fresh).
INFO:Trainer:Saving best checkpoint to: verf/ttv/new/best_gait_model-251214_2126.pth
INFO:Trainer:Beginning 30 epochs...
INFO:Trainer:Epoch [1/30] Train: 0.0084 | Val: 0.1483 | 269.4s                     
INFO:Trainer:--> New Best Model Saved! (Loss: 0.1483)
INFO:Trainer:Epoch [2/30] Train: 0.0001 | Val: 0.1497 | 267.1s                     
INFO:Trainer:Epoch [3/30] Train: 0.0000 | Val: 0.1499 | 266.4s                     
INFO:Trainer:Epoch [4/30] Train: 0.0000 | Val: 0.1499 | 265.9s                     
INFO:Trainer:Epoch [5/30] Train: 0.0000 | Val: 0.1482 | 265.9s                     
INFO:Trainer:--> New Best Model Saved! (Loss: 0.1482)
INFO:Trainer:Epoch [6/30] Train: 0.0000 | Val: 0.1482 | 267.5s                     
INFO:Trainer:--> New Best Model Saved! (Loss: 0.1482)
INFO:Trainer:Epoch [7/30] Train: 0.0000 | Val: 0.1481 | 267.5s                     
INFO:Trainer:--> New Best Model Saved! (Loss: 0.1481)
Epoch 8:  40%|████████████▏                 | 6165/15229 [1:57:37<02:46, 54.45it/s]Traceback (most recent call last):                                                 

