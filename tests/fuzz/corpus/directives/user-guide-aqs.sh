#!/bin/bash
#AQS -n 8 -t 1:00:00
mpirun ./app
