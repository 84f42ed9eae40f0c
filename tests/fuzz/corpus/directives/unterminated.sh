#!/bin/sh
#AQS -J "unterminated
