// TEMPORARY stub
